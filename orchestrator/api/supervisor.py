"""`Supervisor`: the server's background work (reaper, turn watches, image builds, sweeps), none
of which may take the server down.

Everything runs in the lifespan's task group, where one escaping exception would cancel the
group and close the store and the pipeline while the process goes on answering. So each task is
guarded: an exception is logged with its traceback, counted, and the task ends alone; a periodic
job logs and runs again at its next tick. `serving` is what `/healthz` reports: true between
start-up and shutdown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable

import anyio
import structlog
from anyio.abc import TaskGroup

from orchestrator.spawn import Work

log = structlog.get_logger(__name__)


class Supervisor:
    """Starts guarded tasks in `tg`; counts what failed, by task name."""

    def __init__(self, tg: TaskGroup) -> None:
        self._tg = tg
        self.failures: Counter[str] = Counter()
        self.serving = False

    def spawn(self, work: Work, *, name: str | None = None) -> None:
        """Run `work` once in the background; an exception in it is logged, never raised."""
        label = name or str(getattr(work, "__qualname__", "task"))

        async def guarded() -> None:
            await self._guarded(label, work)

        self._tg.start_soon(guarded, name=label)

    def every(self, interval: float, step: Callable[[], Awaitable[object]], *, name: str) -> None:
        """Run `step` every `interval` seconds until shutdown; a failing pass is logged and the next
        one runs on time."""

        async def loop() -> None:
            while True:
                await anyio.sleep(interval)
                await self._guarded(name, step)

        self._tg.start_soon(loop, name=name)

    async def _guarded(self, name: str, work: Callable[[], Awaitable[object]]) -> None:
        try:
            await work()
        except Exception as exc:  # the point: nothing escapes into the task group
            self.failures[name] += 1
            log.error("background task failed", task=name, error=type(exc).__name__, exc_info=exc)
