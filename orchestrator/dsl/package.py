"""`package.yao`: an assistant's metadata and model settings (Yao's `AssistantModel` keys).

Every key Yao's loader reads is accepted, in the shapes Yao's converters accept (`db`/`kb` as a
list, `modes` as one string, prompts as a YAML string or with structured content), so real Yao
assistants load; keys Yao fills in itself (`assistant_id`, `path`, `locales`, ...) and older keys
Yao's own applications still carry (`hooks`, `option`, `version`) are accepted too. Keys that load
but do nothing in Cage are named in load warnings (`orchestrator.dsl.inert`). Cage adds
`history_size` and reads an embedded `sandbox` with `version: "2.0"` (Yao's path B; a
`sandbox.yao` file wins). Any other key is an error.
"""

from __future__ import annotations

from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.attribute_docs import describe_fields
from orchestrator.dsl.agentconfig import Uses
from orchestrator.dsl.mcp import McpConfig
from orchestrator.dsl.sandbox import SandboxSpec

_STRICT = ConfigDict(extra="forbid", frozen=True, json_schema_extra=describe_fields)


class Prompt(BaseModel):
    """One message of `prompts.yml` or a preset: `{role, content, name?}`."""

    model_config = _STRICT
    role: Literal["system", "user", "assistant", "developer"]
    content: str
    """Text; structured content (a list of `{type: text, text}` parts) is joined into text."""
    name: str = ""

    @field_validator("content", mode="before")
    @classmethod
    def _content(cls, v: Any) -> Any:
        if isinstance(v, dict):
            v = [v]
        if isinstance(v, list):
            parts = []
            for part in v:
                if isinstance(part, str):
                    parts.append(part)
                elif isinstance(part, dict) and isinstance(part.get("text"), str):
                    parts.append(part["text"])
                else:
                    raise ValueError("structured content must be a list of {type: text, text} parts")
            return "\n".join(parts)
        return v


class PackageOptions(BaseModel):
    """`options`: request parameters for the model.

    The typed keys are checked; any other key is added to the provider's request body as is
    (Yao forwards this map unchanged and providers keep adding parameters). LLM mode, `yaocode`
    and `tai` send every key their connector's API has; the CLI runners map the keys their CLI
    has a setting for. A key a runner or provider cannot honour is refused at load time with
    the reason (`orchestrator.dsl.option_support`), never dropped.
    """

    model_config = ConfigDict(extra="allow", frozen=True, json_schema_extra=describe_fields)
    model: str | None = None
    """Model name overriding the connector's."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    stop: str | tuple[str, ...] | None = None
    seed: int | None = None
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None


class CompactionSettings(BaseModel):
    """`compaction` (Cage): summarise the oldest history once a request would pass a token budget.

    On by default for LLM mode, `yaocode` and `tai`; `false` turns it off. `true` or an object
    turns it on, optionally with its own budget.
    """

    model_config = _STRICT
    enabled: bool = True
    budget_tokens: int | None = Field(default=None, ge=1000)
    """Estimated input tokens that trigger compaction; default: 80% of the connector's context
    window (`capabilities.max_input_tokens`, else 128k) less the reply's `max_tokens`."""
    keep_rounds: int = Field(default=2, ge=0, le=50)
    """Rounds of the current turn kept word for word when the turn itself must be compacted."""

    @classmethod
    def parse(cls, v: Any) -> Any:
        return {"enabled": v} if isinstance(v, bool) else v


class Placeholder(BaseModel):
    model_config = _STRICT
    title: str = ""
    description: str = ""
    prompts: tuple[str, ...] = ()
    """Suggested first messages shown by a UI."""


class ConnectorChoice(BaseModel):
    """`connector_options`: which connectors a user may pick for this assistant."""

    model_config = _STRICT
    optional: bool | None = None
    connectors: tuple[str, ...] = ()
    filters: tuple[
        Literal[
            "vision",
            "audio",
            "tool_calls",
            "reasoning",
            "streaming",
            "json",
            "multimodal",
            "temperature_adjustable",
        ],
        ...,
    ] = ()


class KnowledgeBase(BaseModel):
    """`kb`: an object, or (Yao's older shape) the list of collections."""

    model_config = _STRICT
    collections: tuple[str, ...] = ()
    options: dict[str, Any] = Field(default_factory=dict)


class DatabaseModels(BaseModel):
    """`db`: an object, or (Yao's older shape) the list of models."""

    model_config = _STRICT
    models: tuple[str, ...] = ()
    options: dict[str, Any] = Field(default_factory=dict)


class Workflow(BaseModel):
    model_config = _STRICT
    workflows: tuple[str, ...] = ()
    options: dict[str, Any] = Field(default_factory=dict)


class PackageSpec(BaseModel):
    """The whole of `package.yao`."""

    model_config = _STRICT
    name: str = Field(min_length=1)
    """Display name (required)."""
    type: str = "assistant"
    avatar: str = ""
    description: str = ""
    tags: tuple[str, ...] = ()
    """A list, or one string."""
    sort: int = 0
    connector: str | None = None
    """Connector id, `$ENV.NAME`, or `use::<role>` (resolved through `agent.yml` `roles`)."""
    connector_options: ConnectorChoice | None = None
    options: PackageOptions = PackageOptions()
    prompts: tuple[Prompt, ...] = ()
    """Inline prompts; `prompts.yml` replaces them."""
    prompt_presets: dict[str, tuple[Prompt, ...]] = Field(default_factory=dict)
    """Inline presets; files in `prompts/` replace presets of the same name."""
    disable_global_prompts: bool = False
    """Leave out the global prompts of `agent/prompts.yml`."""
    capabilities: str = ""
    """What the assistant can do, in words (Yao uses it for robot orchestration); `{{ capabilities }}`."""
    modes: tuple[str, ...] | None = None
    """Chat modes the assistant supports (`chat`, `task`); null means all."""
    default_mode: str = ""
    mentionable: bool = False
    automated: bool = False
    readonly: bool = False
    """Also implied for system ids (`__yao.*`, `yao.*`)."""
    public: bool = False
    share: Literal["", "private", "team"] = ""
    built_in: bool = False
    placeholder: Placeholder | None = None
    kb: KnowledgeBase | None = None
    db: DatabaseModels | None = None
    mcp: McpConfig | None = None
    workflow: Workflow | None = None
    uses: Uses | None = None
    """Overrides `agent.yml` `uses` key by key."""
    search: dict[str, Any] | None = None
    """Yao's search settings (web, kb, db, citation, ...), passed through."""
    source: str = ""
    """Yao's inline TypeScript hook source; Cage hooks live in `src/index.py`, so it is not run."""
    sandbox: SandboxSpec | None = None
    """Embedded sandbox (`version: "2.0"`); a `sandbox.yao` file next to the package wins."""
    history_size: int | None = Field(default=None, ge=0)
    """Messages of history sent with a turn (Cage); default from `agent.yml`."""
    compaction: CompactionSettings = CompactionSettings()
    """Context compaction for LLM mode, `yaocode` and `tai` (Cage); on unless `false`."""
    assistant_id: str = ""
    """Set by the loader from the directory; a value in the file is ignored."""
    path: str = ""
    """Set by the loader from the directory; a value in the file is ignored."""
    created_at: int | str | None = None
    updated_at: int | str | None = None
    dependencies: dict[str, str] = Field(default_factory=dict)
    """Yao registry: MCP clients this assistant needs, name -> version constraint."""
    locales: dict[str, Any] | None = None
    """Filled by Yao's loader from `locales/`; a value in the file is ignored."""
    hooks: dict[str, str] | None = None
    """Older Yao packages name their hook functions here; both run the `Create`/`Next` of `src/index.ts`."""
    option: dict[str, Any] | None = None
    """Older spelling in some Yao packages; Yao reads only `options`."""
    version: str = ""
    """Package version (metadata)."""

    @field_validator("compaction", mode="before")
    @classmethod
    def _compaction(cls, v: Any) -> Any:
        return CompactionSettings.parse(v)

    @field_validator("tags", "modes", mode="before")
    @classmethod
    def _one_string(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("kb", "db", mode="before")
    @classmethod
    def _list_shape(cls, v: Any, info: Any) -> Any:
        if isinstance(v, list):
            return {"collections" if info.field_name == "kb" else "models": v}
        return v

    @field_validator("prompts", mode="before")
    @classmethod
    def _yaml_prompts(cls, v: Any) -> Any:
        if isinstance(v, str):  # Yao accepts the prompts as one YAML string
            try:
                return yaml.safe_load(v) or []
            except yaml.YAMLError:
                raise ValueError("prompts as a string must be YAML: a list of {role, content}") from None
        return v
