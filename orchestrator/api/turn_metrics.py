"""Turn metrics: how turns end (by runner and status), how long they take, and how soon the first
event reaches a client. Every way of starting a turn goes through `TurnMetrics.track`. Metrics
only: whether a turn may start is the pipeline's decision (`PipelineService.start`, the one
admission point)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from orchestrator.api.metrics import Metrics
from orchestrator.errors import CageError
from orchestrator.pipeline import TurnHandle
from orchestrator.spawn import Spawn
from orchestrator.stream import Event

log = structlog.get_logger(__name__)


@dataclass
class _Turn:
    runner: str
    started: float
    first_seen: bool = False


class TurnMetrics:
    """Per-turn figures for `Metrics`: counted when a turn ends, timed from its start."""

    def __init__(
        self, metrics: Metrics, spawn: Spawn, *, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self._metrics = metrics
        self._spawn = spawn
        self._clock = clock
        self._turns: dict[str, _Turn] = {}

    def track(self, handle: TurnHandle, runner: str) -> None:
        """Watch `handle` in the background until its result; the watch outlives the request."""
        self._turns[handle.turn_id] = _Turn(runner=runner, started=self._clock())

        async def watch() -> None:
            status = "error"
            try:
                status = (await handle.result()).status
            except CageError as exc:
                log.warning("turn ended with an error", turn_id=handle.turn_id, error=type(exc).__name__)
            except Exception as exc:  # a watch never takes the server down
                log.error("turn watch failed", turn_id=handle.turn_id, error=type(exc).__name__, exc_info=exc)
            finally:
                turn = self._turns.pop(handle.turn_id, None)
                if turn is not None:
                    self._metrics.turns.labels(turn.runner, status).inc()
                    self._metrics.turn_duration.labels(turn.runner).observe(self._clock() - turn.started)

        self._spawn(watch)

    def saw(self, event: Event) -> None:
        """`event` reached a client; the first one per turn is measured."""
        turn = self._turns.get(event.turn_id)
        if turn is not None and not turn.first_seen:
            turn.first_seen = True
            self._metrics.first_event.labels(turn.runner).observe(self._clock() - turn.started)

    def running(self) -> int:
        return len(self._turns)
