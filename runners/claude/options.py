"""`runner.options` for the claude runner, validated: permission mode, turn cap, tool rules, model."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from runners.options import RunnerOptions

PermissionMode = Literal["default", "acceptEdits", "bypassPermissions", "plan", "dontAsk", "auto"]


class ClaudeOptions(RunnerOptions):
    """The `runner.options` of a claude sandbox.yao that Cage maps onto Claude Code flags (Yao's
    four keys and `model`). An unknown key is an error naming its key path, as for every runner."""

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
