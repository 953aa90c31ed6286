"""`TurnWatchdog`: cancel, turn timeout and stall for one runner turn, CLI (the bridge) or loop
(`yaocode`), and what a turn it cut short ends with.

No clock is polled: the watchdog sleeps until the earlier of the turn's deadline and the stall
deadline, or until the cancel is set. Each event the turn produces moves the stall deadline on
(`touch()`, one clock read per call); when the sleep ends early of it, the watchdog just sleeps
again to the new one. While a request waits for a human (`held`) the stall clock does not run.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio

from orchestrator.permissions import PermissionGate
from orchestrator.pipeline.permissions import PermissionBroker
from orchestrator.stream import Emit, Event, TurnBuilder
from runners.base import TurnOutcome


class StopReason(enum.StrEnum):
    """Why a runner turn was stopped before it ended on its own."""

    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    STALLED = "stalled"


@dataclass(frozen=True)
class TurnLimits:
    turn_timeout: float | None = None
    """Seconds the whole turn may take; then it is stopped like a cancel (outcome `error`)."""
    stall_timeout: float | None = None
    """Seconds without any output before `turn/stalled` is emitted and the turn stopped."""
    linger_seconds: float = 10.0
    """Seconds a CLI may keep running after it reported the end of its turn."""


def _never() -> bool:
    return False


class TurnWatchdog:
    """Watches one turn: `watch()` returns why it must stop: cancel, turn timeout or stall."""

    def __init__(self, limits: TurnLimits, cancel: anyio.Event, *, held: Callable[[], bool] = _never) -> None:
        """`held`: true while a request waits for a human (the turn is silent on purpose)."""
        self._limits = limits
        self._cancel = cancel
        self._held = held
        self._last = anyio.current_time()

    def touch(self) -> None:
        """The turn did something: the stall deadline moves on."""
        self._last = anyio.current_time()

    def idle_ms(self) -> int:
        """Milliseconds since the turn last did something."""
        return int((anyio.current_time() - self._last) * 1000)

    async def watch(self) -> StopReason:
        """Until the cancel is set (`CANCELLED`), the turn timeout passes since this call
        (`TIMEOUT`), or the stall timeout passes with no `touch()` (`STALLED`), in that order."""
        limits = self._limits
        self._last = started = anyio.current_time()  # the clocks start with the watch
        turn_end = started + limits.turn_timeout if limits.turn_timeout is not None else math.inf
        while True:
            stall_end = self._last + limits.stall_timeout if limits.stall_timeout is not None else math.inf
            with anyio.CancelScope(deadline=min(turn_end, stall_end)):
                await self._cancel.wait()
            if self._cancel.is_set():
                return StopReason.CANCELLED
            now = anyio.current_time()
            if now >= turn_end:
                return StopReason.TIMEOUT
            if limits.stall_timeout is not None and now >= self._last + limits.stall_timeout:
                if not self._held():
                    return StopReason.STALLED
                self._last = now  # a human is being asked: the stall clock starts again


def cut_short(
    outcome: TurnOutcome, reason: StopReason | None, limits: TurnLimits, stalled: str
) -> TurnOutcome:
    """The turn's outcome: as the runner ended it, unless the watchdog timed it out or found it
    stalled (an error; `stalled` says what was silent, e.g. "no output")."""
    if reason is StopReason.TIMEOUT:
        error = f"turn timed out after {limits.turn_timeout:g}s"
    elif reason is StopReason.STALLED:
        error = f"{stalled} for {limits.stall_timeout:g}s"
    else:
        return outcome
    return outcome.model_copy(update={"status": "error", "error": error, "stop_reason": reason.value})


class WatchedLoop:
    """The `runners.loop_adapter.LoopWatch` of a loop turn (`yaocode`): its events go through
    `emit`, which touches the watchdog; `run` sets `stop` (the loop's cancel) when the watchdog
    says so, after a `turn/stalled` event for a stall. The loop runs in the orchestrator, so there
    is no process to signal."""

    def __init__(
        self,
        emit: Emit,
        builder: TurnBuilder,
        limits: TurnLimits,
        cancel: anyio.Event,
        gate: PermissionGate | None = None,
    ) -> None:
        broker = gate if isinstance(gate, PermissionBroker) else None
        self._emit = emit
        self._builder = builder
        self.watchdog = TurnWatchdog(limits, cancel, held=lambda: broker is not None and broker.waiting > 0)
        self.stop = anyio.Event()
        self.reason: StopReason | None = None

    async def emit(self, events: Sequence[Event]) -> None:
        self.watchdog.touch()
        await self._emit(events)

    async def run(self) -> None:
        reason = await self.watchdog.watch()
        if reason is StopReason.STALLED:
            await self._emit(self._builder.stalled(self.watchdog.idle_ms(), "no events from the agent loop"))
        self.reason = reason
        self.stop.set()
