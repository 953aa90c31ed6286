"""`agent.yml`: the application's global agent defaults.

Yao keeps it in `agent/agent.yml` (beside `agent/prompts.yml`, `kb.yml`, `search.yml` and
`locales/`); a root `agent.yml` is Cage's shorthand for the same file. Yao's keys (`uses`,
`store`, `cache`, `system`, `models`, `kb`, `search`, `runner`) plus Cage's: `roles` (per-role
connectors `default`, `light`, `heavy`, `vision`, `audio`, which `use::<role>` in a package
resolves through; Yao spells the same thing `system.<role>`, and both work), `fallback` (the
assistant that takes over when the LLM tool loop fails) and `history_size`. Inline connector
definitions under `connectors:` are read by the loader into the connector table, not into this
model. Keys that load but do nothing in Cage are listed in `orchestrator.dsl.inert`.

These values sit *under* each assistant's own fields: an assistant that sets a value wins.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.attribute_docs import describe_fields
from orchestrator.dsl.sandbox import KNOWN_RUNNERS, canonical_runner

_STRICT = ConfigDict(extra="forbid", frozen=True, json_schema_extra=describe_fields)
ROLES = ("default", "light", "heavy", "vision", "audio")
Role = Literal["default", "light", "heavy", "vision", "audio"]
USE_PREFIX = "use::"
DEFAULT_FALLBACK = "__yao.loop_fallback"
DEFAULT_HISTORY_SIZE = 20


class Uses(BaseModel):
    """Which connector or assistant handles each auxiliary job (Yao's `uses`)."""

    model_config = _STRICT
    default: str | None = None
    """Yao: the default assistant (Yao's own default `mohe`). Cage also accepts a connector id
    here, used for assistants that name none (below `roles.default`)."""
    title: str | None = None
    prompt: str | None = None
    robot_prompt: str | None = None
    vision: str | None = None
    """Assistant id or `mcp:<server>` that describes images for models without vision."""
    audio: str | None = None
    search: str | None = None
    fetch: str | None = None
    web: str | None = None
    keyword: str | None = None
    querydsl: str | None = None
    rerank: str | None = None
    inspiration: str | None = None
    """Yao robot pipeline phase agents (`inspiration` ... `validation`)."""
    goals: str | None = None
    tasks: str | None = None
    delivery: str | None = None
    learning: str | None = None
    host: str | None = None
    validation: str | None = None
    db: str | None = None
    """In Yao's starter `agent.yml` only; Yao's loader does not read it."""

    def merged_over(self, base: Uses) -> Uses:
        """`self` on top of `base`: every value `self` sets wins."""
        mine = self.model_dump(exclude_none=True)
        return base.model_copy(update={k: v for k, v in mine.items() if v})


class StoreSetting(BaseModel):
    """Chat history storage (Yao's `store`)."""

    model_config = _STRICT
    connector: str = ""
    max_size: int | None = Field(default=None, ge=1)
    """History messages kept per chat (Yao's default 20)."""
    ttl: int | None = Field(default=None, ge=0)
    """Seconds a chat is kept."""
    optional: dict[str, Any] = Field(default_factory=dict)
    expiration: str | None = None
    """In Yao's sample `agent.yml` only; Yao reads `ttl`."""


class SystemConnectors(BaseModel):
    """Yao's `system`: role-level connectors (`default`, `light`, `heavy`, `vision`, `audio`, the
    same roles as Cage's `roles`) and connectors of its system agents (`__yao.title`, ...)."""

    model_config = _STRICT
    default: str | None = None
    light: str | None = None
    heavy: str | None = None
    vision: str | None = None
    audio: str | None = None
    keyword: str | None = None
    querydsl: str | None = None
    title: str | None = None
    prompt: str | None = None
    robot_prompt: str | None = None
    needsearch: str | None = None
    entity: str | None = None


class RoleConnectors(BaseModel):
    """Connector id per role; `use::<role>` in a package resolves here."""

    model_config = _STRICT
    default: str | None = None
    light: str | None = None
    """Cheap, fast model for small jobs; falls back to `default`."""
    heavy: str | None = None
    """Strongest model; falls back to `default`."""
    vision: str | None = None
    """Model with image input; falls back to `default`."""
    audio: str | None = None
    """Model with audio input; falls back to `default`."""


class AgentConfig(BaseModel):
    """The whole of `agent.yml` (without its inline `connectors:`)."""

    model_config = _STRICT
    uses: Uses = Uses()
    store: StoreSetting = StoreSetting()
    cache: str = ""
    """Cache store name (Yao's default `__yao.agent.cache`)."""
    system: SystemConnectors = SystemConnectors()
    models: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Model capabilities by model name (Yao's `models`)."""
    kb: dict[str, Any] | None = None
    search: dict[str, Any] | None = None
    runner: str | None = None
    """Default runner for `sandbox.yao` files that name none."""
    roles: RoleConnectors = RoleConnectors()
    fallback: str = DEFAULT_FALLBACK
    """Assistant that takes over when an LLM-mode tool loop fails or runs out of turns."""
    history_size: int | None = Field(default=None, ge=0)
    """Messages of history sent with a turn; default `store.max_size`, else 20."""
    default_connector: str | None = Field(default=None, exclude=True)
    """Set by the loader: `uses.default` when it names a connector (Cage's shorthand)."""

    @field_validator("runner")
    @classmethod
    def _runner(cls, v: str | None) -> str | None:
        if v is None:
            return None
        name = canonical_runner(v)
        if name not in KNOWN_RUNNERS:
            raise ValueError(f"unknown runner {v!r}; expected one of {', '.join(KNOWN_RUNNERS)}")
        return name

    def role_connector(self, role: str) -> str | None:
        """Connector id for `role`: `roles.<role>` or `system.<role>`, then the same for
        `default`, then `uses.default` when it names a connector.

        Raises:
            ValueError: `role` is not one of `default`, `light`, `heavy`, `vision`, `audio`.
        """
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
        found: str | None = getattr(self.roles, role) or getattr(self.system, role)
        return found or self.roles.default or self.system.default or self.default_connector

    def effective_history_size(self) -> int:
        """`history_size`, else `store.max_size`, else 20."""
        if self.history_size is not None:
            return self.history_size
        return self.store.max_size or DEFAULT_HISTORY_SIZE
