"""`NativeOptions`: the `runner.options` of the native loop, shared by `yaocode` and `tai`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.errors import RunnerError


class NativeOptions(BaseModel):
    """Knobs of one native-loop turn; unknown keys are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    max_rounds: int = Field(default=8, ge=1, le=500)
    """Model steps per turn; the turn stops with `max_rounds` after that many."""
    parallel_tools: bool = True
    """Run the tool calls of one step concurrently (False: one after the other)."""
    max_parallel: int = Field(default=4, ge=1, le=64)
    """Tool calls of one step running at once."""
    tool_timeout: float = Field(default=300.0, gt=0)
    """Seconds any one tool call may take."""
    bash_timeout: float = Field(default=120.0, gt=0)
    """Default timeout of a `bash` call that names none."""
    agent: bool = True
    """Offer the `agent` tool (read-only sub-agents, at most 8 at once)."""
    agent_system: str | None = Field(default=None, min_length=1)
    """The sub-agents' system prompt (the seed's overridable task-agent prompt); None: Cage's own."""

    def rounds(self, max_turn: int | None) -> int:
        """The turn's round budget: `mcp.options.max_turn` when the package sets it (Yao's tool
        loop limit), capped by an explicit `max_rounds`; else `max_rounds`."""
        if max_turn is None:
            return self.max_rounds
        return min(max_turn, self.max_rounds) if "max_rounds" in self.model_fields_set else max_turn

    @classmethod
    def parse(cls, runner: str, options: Mapping[str, Any]) -> NativeOptions:
        """`runner.options` from sandbox.yao as options.

        Raises:
            RunnerError: an unknown key or a bad value (named in the message).
        """
        try:
            return cls.model_validate(dict(options))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'options'}: {e['msg']}" for e in exc.errors()
            )
            raise RunnerError(runner, f"bad runner.options: {problems}") from exc
