"""The reaper: a background sweep that stops or removes idle sandboxes (DESIGN.md lifecycles).

* `session`: removed after `idle_timeout` without a turn;
* `longrunning`: stopped after `idle_timeout`, removed once older than `max_lifetime`;
* `persistent`: never touched;
* `oneshot`: normally removed at release; one left idle (a failed removal) is removed;
* an unclaimed warm-pool box: left to the pool's own sweep (`WarmPool.sweep`, every replica runs
  it for its own pool), which removes it after `CAGE_POOL_IDLE` or when its config hash is stale,
  claiming it first so that another process's claim is never undone.

A sandbox with a turn in flight is never reaped, however long the turn runs. Each action is
re-checked under the sandbox's identity lock, so a sweep cannot race an `acquire` that is about to
reuse the box.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
import structlog

from orchestrator.dsl.sandbox import Lifecycle
from orchestrator.redaction import redact
from orchestrator.sandbox.manager import SandboxManager
from orchestrator.sandbox.registry import TrackedSandbox

log = structlog.get_logger(__name__)


class ReapAction(enum.StrEnum):
    STOP = "stop"
    REMOVE = "remove"


def decide(box: TrackedSandbox, now: float) -> ReapAction | None:
    """What the reaper should do with `box` at time `now` (None: leave it).

    An unclaimed pooled box is the warm pool's to reap (`WarmPool.sweep`), never a plain remove."""
    if box.busy or box.lifecycle is Lifecycle.PERSISTENT or box.pool_key is not None:
        return None
    idle = box.idle_for(now)
    if box.lifecycle is Lifecycle.ONESHOT:
        return ReapAction.REMOVE
    old = box.max_lifetime is not None and now - box.created_at > box.max_lifetime
    if box.lifecycle is Lifecycle.LONGRUNNING and old:
        return ReapAction.REMOVE
    if box.idle_timeout is None or idle <= box.idle_timeout:
        return None
    if box.lifecycle is Lifecycle.SESSION:
        return ReapAction.REMOVE
    return None if box.stopped else ReapAction.STOP


def _still(action: ReapAction, clock: Callable[[], float]) -> Callable[[TrackedSandbox], bool]:
    def check(box: TrackedSandbox) -> bool:
        return decide(box, clock()) is action

    return check


@dataclass(frozen=True)
class FleetUse:
    """What other replicas do with one box: a turn of theirs may be in it (`busy`), and how long
    ago they last used it (None: unknown)."""

    busy: bool
    idle_for: float | None


FleetView = Callable[[list[TrackedSandbox]], Awaitable[dict[str, FleetUse]]]
"""Asked once per sweep, by box name (several replicas on one database: `orchestrator.api.cluster`)."""


class Reaper:
    """Runs `sweep()` every `interval` seconds until cancelled (put it in the app's task group).

    With `fleet` (one elected replica reaps for all), a box another replica's turn may be using is
    left alone, and its idle clock counts from the latest use on any replica."""

    def __init__(
        self, manager: SandboxManager, *, interval: float | None = None, fleet: FleetView | None = None
    ) -> None:
        self.manager = manager
        self.interval = manager.settings.reaper_interval if interval is None else interval
        self.fleet = fleet

    async def sweep(self) -> list[tuple[str, ReapAction]]:
        """One pass over the tracked sandboxes; returns what was done."""
        done: list[tuple[str, ReapAction]] = []
        clock = self.manager.registry.clock
        boxes = self.manager.registry.all()
        elsewhere = await self.fleet(boxes) if self.fleet is not None and boxes else {}
        for box in boxes:
            use = elsewhere.get(box.ref.name)
            if use is not None and use.busy:
                continue
            if use is not None and use.idle_for is not None:
                box.last_used = max(box.last_used, clock() - use.idle_for)
            action = decide(box, clock())
            if action is None:
                continue
            name = box.ref.name
            try:
                acted = await self.manager.retire(
                    name, remove=action is ReapAction.REMOVE, still=_still(action, clock)
                )
            except Exception as exc:  # noqa: BLE001 - one failing box (a timed-out call too) skips only it
                log.warning(
                    "reaper could not retire sandbox",
                    sandbox=name,
                    action=action.value,
                    error=type(exc).__name__,
                    detail=redact(str(exc))[:300],
                )
                continue
            if acted:
                done.append((name, action))
        return done

    async def run(self) -> None:
        """Sweep forever; any error in one pass is logged and the next pass retries (an escaping
        exception would end the task group the reaper runs in)."""
        while True:
            await anyio.sleep(self.interval)
            try:
                await self.sweep()
            except Exception as exc:  # the reaper outlives every failure
                log.error("reaper pass failed", error=type(exc).__name__, exc_info=exc)
