"""`CallOptions`: the turn's options for one call (`TurnOptions` and more), after a Create hook's
overrides."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, JsonValue

from orchestrator.attribute_docs import describe_fields
from orchestrator.pipeline.contract import TurnOptions

_FROZEN = ConfigDict(frozen=True, extra="forbid", json_schema_extra=describe_fields)


class CallOptions(TurnOptions):
    """Everything that steers one call: the turn's options and what a Create hook may add; hooks
    see (and override) it as a dict."""

    model_config = _FROZEN
    prompt_preset: str | None = None
    disable_global_prompts: bool | None = None
    mcp_servers: tuple[dict[str, JsonValue], ...] | None = None
    """`[{server_id, tools?, resources?}]` replacing the assistant's MCP servers for this call."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    uses: dict[str, JsonValue] | None = None

    @classmethod
    def from_turn(cls, options: TurnOptions, metadata: dict[str, JsonValue]) -> CallOptions:
        return cls(**options.model_dump(), metadata=metadata)

    def for_hook(self) -> dict[str, Any]:
        """What a hook receives as `options` (no host paths)."""
        return self.model_dump(mode="json", exclude={"host_workspace"}, exclude_none=True)

    def with_overrides(self, overrides: dict[str, Any]) -> CallOptions:
        """These options with a hook's overrides applied; `metadata` is merged, not replaced.

        Raises:
            pydantic.ValidationError: an override has the wrong type.
        """
        data = self.model_dump()
        for key, value in overrides.items():
            if key == "metadata" and isinstance(value, dict):
                data["metadata"] = {**data["metadata"], **value}
            elif value is not None:
                data[key] = value
        return CallOptions.model_validate(data)

    def forked(self, overrides: dict[str, Any]) -> CallOptions:
        """Options of an agent-to-agent call: history skipped, the caller's metadata inherited."""
        allowed = {k: v for k, v in overrides.items() if k in CallOptions.model_fields}
        base = self.model_copy(update={"skip_history": True})
        return base.with_overrides(allowed)


def tightened(asked: float | None, configured: float | None) -> float | None:
    """A request's limit against the operator's: it may shorten it, never lengthen it."""
    if asked is None:
        return configured
    return asked if configured is None else min(asked, configured)
