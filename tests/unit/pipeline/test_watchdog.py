"""`TurnWatchdog` on a fake clock (trio's `MockClock`, which jumps to the next deadline as soon as
every task waits): cancel, turn timeout and stall, each event moving the stall deadline on, a human
being asked holding it; and the loop runner's `WatchedLoop` (the stall's event, the loop's stop).
The watchdog has no tick: what it does at a time is what the clock says, exactly."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import anyio
from trio.testing import MockClock

from orchestrator.pipeline.watchdog import StopReason, TurnLimits, TurnWatchdog, WatchedLoop, cut_short
from orchestrator.stream import CountingIds, Event, TurnBuilder, Usage
from runners.base import TurnOutcome

T = TypeVar("T")
DONE = TurnOutcome(status="completed", stop_reason="end_turn", usage=Usage(input_tokens=3))


def _on_fake_clock(main: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(main, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)})


async def _stopped(watchdog: TurnWatchdog) -> tuple[StopReason, float]:
    started = anyio.current_time()
    reason = await watchdog.watch()
    return reason, anyio.current_time() - started


def test_a_set_cancel_stops_at_once() -> None:
    async def main() -> tuple[StopReason, float]:
        cancel = anyio.Event()
        cancel.set()
        return await _stopped(TurnWatchdog(TurnLimits(turn_timeout=5, stall_timeout=1), cancel))

    assert _on_fake_clock(main) == (StopReason.CANCELLED, 0)


def test_a_cancel_mid_turn_stops_when_it_comes() -> None:
    async def main() -> tuple[StopReason, float]:
        cancel = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def later() -> None:
                await anyio.sleep(3)
                cancel.set()

            tg.start_soon(later)
            return await _stopped(TurnWatchdog(TurnLimits(turn_timeout=60), cancel))

    assert _on_fake_clock(main) == (StopReason.CANCELLED, 3)


def test_the_turn_timeout_stops_the_turn_whatever_it_does() -> None:
    async def main() -> tuple[StopReason, float]:
        watchdog = TurnWatchdog(TurnLimits(turn_timeout=10, stall_timeout=2), anyio.Event())
        async with anyio.create_task_group() as tg:

            async def busy() -> None:
                while True:
                    await anyio.sleep(1)
                    watchdog.touch()

            tg.start_soon(busy)
            stopped = await _stopped(watchdog)
            tg.cancel_scope.cancel()
        return stopped

    assert _on_fake_clock(main) == (StopReason.TIMEOUT, 10)


def test_every_event_moves_the_stall_deadline_on() -> None:
    async def main() -> tuple[StopReason, float, int]:
        watchdog = TurnWatchdog(TurnLimits(stall_timeout=2), anyio.Event())
        async with anyio.create_task_group() as tg:

            async def events() -> None:
                for _ in range(4):  # at 1.5, 3, 4.5 and 6 s; then silence
                    await anyio.sleep(1.5)
                    watchdog.touch()

            tg.start_soon(events)
            reason, after = await _stopped(watchdog)
        return reason, after, watchdog.idle_ms()

    assert _on_fake_clock(main) == (StopReason.STALLED, 8, 2000)


def test_a_human_being_asked_holds_the_stall_clock() -> None:
    async def main() -> tuple[StopReason, float]:
        asking = [True]
        watchdog = TurnWatchdog(TurnLimits(stall_timeout=2), anyio.Event(), held=lambda: asking[0])
        async with anyio.create_task_group() as tg:

            async def answered() -> None:
                await anyio.sleep(7)
                asking[0] = False
                watchdog.touch()  # the answer's events

            tg.start_soon(answered)
            return await _stopped(watchdog)

    assert _on_fake_clock(main) == (StopReason.STALLED, 9)


def test_without_limits_only_a_cancel_stops_the_turn() -> None:
    async def main() -> tuple[StopReason, float]:
        cancel = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def much_later() -> None:
                await anyio.sleep(86_400)
                cancel.set()

            tg.start_soon(much_later)
            return await _stopped(TurnWatchdog(TurnLimits(), cancel))

    assert _on_fake_clock(main) == (StopReason.CANCELLED, 86_400)


async def _loop(limits: TurnLimits, *, cancel_first: bool = False) -> tuple[WatchedLoop, list[Event]]:
    events: list[Event] = []

    async def emit(batch: Sequence[Event]) -> None:
        events.extend(batch)

    builder = TurnBuilder(CountingIds(), runner="yaocode")
    builder.stream_start("a.b")
    cancel = anyio.Event()
    if cancel_first:
        cancel.set()
    watch = WatchedLoop(emit, builder, limits, cancel)
    await watch.run()
    assert watch.stop.is_set()
    return watch, events


def test_a_cancel_stops_the_loop() -> None:
    watch, events = _on_fake_clock(lambda: _loop(TurnLimits(), cancel_first=True))
    assert watch.reason is StopReason.CANCELLED and events == []


def test_the_turn_timeout_stops_the_loop() -> None:
    watch, events = _on_fake_clock(lambda: _loop(TurnLimits(turn_timeout=30)))
    assert watch.reason is StopReason.TIMEOUT and events == []


def test_no_event_for_the_stall_timeout_stops_the_loop_and_says_so() -> None:
    watch, events = _on_fake_clock(lambda: _loop(TurnLimits(stall_timeout=5)))
    assert watch.reason is StopReason.STALLED
    assert [(e.type, e.props.event, e.props.idle_ms) for e in events] == [  # type: ignore[union-attr]
        ("event", "turn/stalled", 5000)
    ]


def test_a_timed_out_or_stalled_turn_is_an_error_keeping_its_usage() -> None:
    limits = TurnLimits(turn_timeout=4, stall_timeout=2)
    timed_out = cut_short(DONE, StopReason.TIMEOUT, limits, "agent loop stalled: no events")
    stalled = cut_short(DONE, StopReason.STALLED, limits, "agent loop stalled: no events")
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
    assert cut_short(DONE, StopReason.CANCELLED, limits, "") == DONE
    assert cut_short(DONE, None, limits, "") == DONE
