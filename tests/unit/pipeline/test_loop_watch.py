"""The watchdog of a loop runner's turn (`yaocode`): cancel, turn timeout and stall set the loop's
stop event with a reason, and a timed-out or stalled turn ends in error."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from orchestrator.pipeline.bridge import StopReason, TurnLimits
from orchestrator.pipeline.loop_watch import LoopWatchdog, stopped_outcome
from orchestrator.stream import CountingIds, Event, TurnBuilder, Usage
from runners.base import TurnOutcome

DONE = TurnOutcome(status="completed", stop_reason="end_turn", usage=Usage(input_tokens=3))


async def _watch(limits: TurnLimits, *, cancel_first: bool = False) -> tuple[LoopWatchdog, list[Event]]:
    events: list[Event] = []

    async def emit(batch: Sequence[Event]) -> None:
        events.extend(batch)

    builder = TurnBuilder(CountingIds(), runner="yaocode")
    builder.stream_start("a.b")
    cancel = anyio.Event()
    if cancel_first:
        cancel.set()
    watch = LoopWatchdog(emit, builder, limits, cancel)
    with anyio.fail_after(30):
        await watch.run()
    assert watch.stop.is_set()
    return watch, events


async def test_a_cancel_stops_the_loop() -> None:
    watch, events = await _watch(TurnLimits(), cancel_first=True)
    assert watch.reason is StopReason.CANCELLED and events == []


async def test_the_turn_timeout_stops_the_loop() -> None:
    watch, _ = await _watch(TurnLimits(turn_timeout=0.3))
    assert watch.reason is StopReason.TIMEOUT


async def test_no_event_for_the_stall_timeout_stops_the_loop_and_says_so() -> None:
    watch, events = await _watch(TurnLimits(stall_timeout=0.3))
    assert watch.reason is StopReason.STALLED
    assert [(e.type, e.props.event) for e in events] == [("event", "turn/stalled")]  # type: ignore[union-attr]


def test_a_timed_out_or_stalled_turn_is_an_error_keeping_its_usage() -> None:
    limits = TurnLimits(turn_timeout=4, stall_timeout=2)
    timed_out = stopped_outcome(DONE, StopReason.TIMEOUT, limits)
    stalled = stopped_outcome(DONE, StopReason.STALLED, limits)
    assert (timed_out.status, timed_out.stop_reason, timed_out.error) == (
        "error",
        "timeout",
        "turn timed out after 4s",
    )
    assert (stalled.status, stalled.stop_reason, stalled.error) == (
        "error",
        "stalled",
        "agent loop stalled: no events for 2s",
    )
    assert timed_out.usage == stalled.usage == DONE.usage
    assert stopped_outcome(DONE, StopReason.CANCELLED, limits) == DONE
    assert stopped_outcome(DONE, None, limits) == DONE
