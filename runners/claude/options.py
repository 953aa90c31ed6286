"""`runner.options` for the claude runner, validated: permission mode, turn cap, tool rules, model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from orchestrator.errors import ConfigError

log = structlog.get_logger(__name__)

PermissionMode = Literal["default", "acceptEdits", "bypassPermissions", "plan", "dontAsk", "auto"]


class ClaudeOptions(BaseModel):
    """The `runner.options` of a claude sandbox.yao that Cage maps onto Claude Code flags."""

    model_config = ConfigDict(frozen=True, extra="ignore", use_attribute_docstrings=True)

    permission_mode: PermissionMode = "bypassPermissions"
    """`--permission-mode`. Bypassing is safe here: the container is the sandbox, and the CLI runs
    as the non-root `sandbox` user (as root Claude Code refuses to bypass)."""
    max_turns: int | None = Field(default=None, ge=1)
    """`--max-turns`: cap on agentic rounds in one turn."""
    allowed_tools: tuple[str, ...] = ()
    """`--allowedTools` rules (`Bash(git log:*)`, `Edit`...): tools that run without asking."""
    disallowed_tools: tuple[str, ...] = ()
    """`--disallowedTools` rules: tools removed from the model's tool set."""
    model: str | None = None
    """Overrides the connector's model."""

    @field_validator("allowed_tools", "disallowed_tools", mode="before")
    @classmethod
    def _tool_list(cls, value: Any) -> Any:
        """Accept a list, or one string separated by commas (Yao's spelling)."""
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value


def parse_options(options: Mapping[str, Any]) -> ClaudeOptions:
    """Validate `runner.options`; keys meant for other runners are ignored (logged at debug).

    Raises:
        ConfigError: a known option has a wrong value (the key path names it).
    """
    unknown = sorted(set(options) - set(ClaudeOptions.model_fields))
    if unknown:
        log.debug("claude.options_ignored", keys=unknown)
    try:
        return ClaudeOptions.model_validate(dict(options))
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        raise ConfigError(first["msg"], file="sandbox.yao", key_path=f"runner.options.{key}") from exc
