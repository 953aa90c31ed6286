"""How a native-loop run ends a turn: status, error text and the `result/summary` event.

Shared by `cage-tai run` and the orchestrator's `yaocode` turn, so both runners end a turn the
same way and their streams stay equivalent.
"""

from __future__ import annotations

from orchestrator.llm import LoopResult
from orchestrator.stream import Event, StreamStatus, TurnBuilder

_STATUS: dict[str, StreamStatus] = {"completed": "completed", "cancelled": "cancelled"}


def loop_status(result: LoopResult) -> tuple[StreamStatus, str | None]:
    """`completed` and `cancelled` as they are; every other stop reason is an `error` with a reason."""
    status = _STATUS.get(result.stop_reason, "error")
    if status != "error":
        return status, None
    if result.stop_reason == "max_rounds":
        return status, f"stopped after {result.rounds} rounds (max_rounds)"
    if result.stop_reason == "tool_loop_terminated":
        return status, "stopped: the same tool call was repeated in consecutive rounds (tool_loop_terminated)"
    return status, result.error or "the agent loop failed"


def summary_events(builder: TurnBuilder, result: LoopResult) -> list[Event]:
    """The `result/summary` of a run: the answer, rounds, stop reason and the turn's usage."""
    status, _ = loop_status(result)
    return builder.result(
        result=result.text or None,
        is_error=status == "error",
        num_turns=result.rounds,
        stop_reason=result.stop_reason,
        usage=result.usage,
    )
