"""`NativeOptions`: the `runner.options` of the native loop, shared by `yaocode` and `tai`."""

from __future__ import annotations

from pydantic import Field

from runners.options import RunnerOptions


class NativeOptions(RunnerOptions):
    """Knobs of one native-loop turn; unknown keys are an error, not silently dropped."""

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
