"""What Create and Next hooks may return, parsed into frozen models at the hook boundary."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from orchestrator.errors import HookError
from orchestrator.pipeline.contract import InputMessage

_FROZEN = ConfigDict(frozen=True, extra="forbid")
M = TypeVar("M", bound=BaseModel)

OVERRIDE_KEYS = (
    "connector",
    "temperature",
    "max_tokens",
    "prompt_preset",
    "disable_global_prompts",
    "mcp_servers",
    "locale",
    "metadata",
    "uses",
)
"""Option overrides a Create hook may return next to `messages` and `delegate`."""

IGNORED_CREATE_KEYS: dict[str, str] = {
    "search": "Cage has no search pipeline (web, knowledge base, database search)",
    "force_uses": "Cage runs no vision, audio or search jobs inside a turn",
    "audio": "Cage's models answer in text; no audio output is produced",
    "theme": "Cage's clients choose their own theme",
    "route": "Cage's clients have no page routes",
}
"""Yao Create fields Cage accepts and does not act on, with why: the turn goes on and the client
gets a `hook/ignored` event naming them."""


class Delegate(BaseModel):
    """Hand the turn to another assistant, in the same stream (its events nest under a thread)."""

    model_config = _FROZEN
    agent_id: str = Field(min_length=1)
    messages: tuple[InputMessage, ...] = ()
    """The messages the delegate gets; empty means the caller's."""
    options: dict[str, JsonValue] = Field(default_factory=dict)


class CreateResult(BaseModel):
    model_config = _FROZEN
    messages: tuple[InputMessage, ...] | None = None
    """Replace the call's messages (the model and the runner see these)."""
    connector: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    prompt_preset: str | None = None
    disable_global_prompts: bool | None = None
    mcp_servers: tuple[dict[str, JsonValue], ...] | None = None
    locale: str | None = None
    metadata: dict[str, JsonValue] | None = None
    uses: dict[str, JsonValue] | None = None
    delegate: Delegate | None = None
    max_completion_tokens: int | None = None
    """Yao's newer name for `max_tokens` (which wins when both are given)."""
    search: JsonValue = None
    force_uses: JsonValue = None
    audio: JsonValue = None
    theme: JsonValue = None
    route: JsonValue = None

    def overrides(self) -> dict[str, Any]:
        out = {k: v for k in OVERRIDE_KEYS if (v := getattr(self, k)) is not None}
        if self.max_tokens is None and self.max_completion_tokens is not None:
            out["max_tokens"] = self.max_completion_tokens
        return out

    def ignored(self) -> tuple[str, ...]:
        """The Yao fields set here that Cage does not act on (`IGNORED_CREATE_KEYS`)."""
        return tuple(k for k in IGNORED_CREATE_KEYS if getattr(self, k) is not None)


class NextResult(BaseModel):
    model_config = _FROZEN
    delegate: Delegate | None = None
    data: JsonValue = None
    """Returned to the caller as the turn's `data` instead of the standard response."""
    metadata: dict[str, JsonValue] | None = None


def parse_result(model: type[M], value: object, *, assistant_id: str, hook: str) -> M:
    """A hook's return value as `model`; None means "nothing to change".

    Raises:
        HookError: the value is not a dict of the documented keys.
    """
    if value is None:
        return model()
    if not isinstance(value, dict):
        raise HookError(assistant_id, hook, f"must return a dict or None, not {type(value).__name__}")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(result)"
        raise HookError(assistant_id, hook, f"returned an invalid {where}: {first['msg']}") from None
