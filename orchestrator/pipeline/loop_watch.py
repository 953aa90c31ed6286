"""`LoopWatchdog`: cancel, turn timeout and stall for a loop runner's turn (`yaocode`), and
the outcome once the watchdog cut the turn short.

The loop runs in the orchestrator, so the bridge's watch over a CLI does not apply; this one
sets `stop` (the loop's cancel event) instead of signalling a process.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from orchestrator.permissions import PermissionGate
from orchestrator.pipeline.bridge import StopReason, TurnLimits
from orchestrator.pipeline.permissions import PermissionBroker
from orchestrator.stream import Emit, Event, TurnBuilder
from runners.base import TurnOutcome

_TICK = 0.2


class LoopWatchdog:
    """Stops the loop on cancel, on the turn timeout, or when no event came for the stall timeout
    (a `runners.loop_adapter.LoopWatch`). While a permission request waits for a human the stall
    clock does not run."""

    def __init__(
        self,
        emit: Emit,
        builder: TurnBuilder,
        limits: TurnLimits,
        cancel: anyio.Event,
        gate: PermissionGate | None = None,
    ) -> None:
        self._emit = emit
        self._gate = gate if isinstance(gate, PermissionBroker) else None
        self._builder = builder
        self._limits = limits
        self._cancel = cancel
        self._stop = anyio.Event()
        self.reason: StopReason | None = None
        self.last_event = anyio.current_time()

    @property
    def stop(self) -> anyio.Event:
        return self._stop

    async def emit(self, events: Sequence[Event]) -> None:
        self.last_event = anyio.current_time()
        await self._emit(events)

    async def run(self) -> None:
        cancel = self._cancel
        started = self.last_event = anyio.current_time()  # the clocks start with the loop
        while True:
            with anyio.move_on_after(_TICK):
                await cancel.wait()
            now = anyio.current_time()
            if self._gate is not None and self._gate.waiting:  # a request waits for a human
                self.last_event = now
            if cancel.is_set():
                self.reason = StopReason.CANCELLED
            elif self._limits.turn_timeout is not None and now - started > self._limits.turn_timeout:
                self.reason = StopReason.TIMEOUT
            elif (
                self._limits.stall_timeout is not None and now - self.last_event > self._limits.stall_timeout
            ):
                idle = int((now - self.last_event) * 1000)
                await self._emit(self._builder.stalled(idle, "no events from the agent loop"))
                self.reason = StopReason.STALLED
            if self.reason is not None:
                self._stop.set()
                return


def stopped_outcome(outcome: TurnOutcome, reason: StopReason | None, limits: TurnLimits) -> TurnOutcome:
    """The turn's outcome: as the loop ended it, unless the turn timed out or stalled (an error)."""
    if reason is StopReason.TIMEOUT:
        error = f"turn timed out after {limits.turn_timeout:g}s"
        return outcome.model_copy(update={"status": "error", "error": error, "stop_reason": "timeout"})
    if reason is StopReason.STALLED:
        error = f"agent loop stalled: no events for {limits.stall_timeout:g}s"
        return outcome.model_copy(update={"status": "error", "error": error, "stop_reason": "stalled"})
    return outcome
