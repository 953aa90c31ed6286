"""The manager's book of live sandboxes: turns in flight, idle clocks and capacity counts."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from orchestrator.dsl.sandbox import Lifecycle
from orchestrator.errors import CapacityError
from orchestrator.sandbox.backend import SandboxRef


@dataclasses.dataclass
class TrackedSandbox:
    """What the reaper needs to know about one sandbox. Times come from the manager's clock."""

    ref: SandboxRef
    owner: str
    assistant_id: str
    lifecycle: Lifecycle
    config_hash: str
    idle_timeout: float | None
    max_lifetime: float | None
    created_at: float
    last_used: float
    busy: int = 0
    stopped: bool = False
    stop_timeout: float = 2.0
    """Seconds between SIGTERM and SIGKILL when the reaper stops it (the sandbox's `stop_timeout`)."""
    survivors: set[tuple[int, int]] = dataclasses.field(default_factory=set)
    """(pid, start time) of processes Cage started to outlive a turn (background prepare steps)."""
    resident: tuple[tuple[str, str], ...] = ()
    """(executable, argument) of the runner's resident servers kept between turns (`strays`)."""
    pool_key: str | None = None
    """Set while the box waits, paused and unclaimed, in a warm pool (`pool.py`); None once claimed."""

    def idle_for(self, now: float) -> float:
        return 0.0 if self.busy else now - self.last_used


class SandboxRegistry:
    """Live sandboxes by name, plus reservations taken before a create finishes.

    A reservation is taken and checked without awaiting in between, so concurrent acquires for
    different identities cannot overshoot the caps together.
    """

    def __init__(self, *, max_total: int, max_per_owner: int, clock: Callable[[], float]) -> None:
        self._boxes: dict[str, TrackedSandbox] = {}
        self._reserved: dict[str, int] = {}
        self._max_total = max_total
        self._max_per_owner = max_per_owner
        self.clock = clock

    def __len__(self) -> int:
        return len(self._boxes)

    def get(self, name: str) -> TrackedSandbox | None:
        return self._boxes.get(name)

    def all(self) -> list[TrackedSandbox]:
        return list(self._boxes.values())

    def put(self, box: TrackedSandbox) -> None:
        self._boxes[box.ref.name] = box

    def drop(self, name: str) -> TrackedSandbox | None:
        return self._boxes.pop(name, None)

    def count(self, owner: str | None = None) -> int:
        live = sum(1 for b in self._boxes.values() if owner is None or b.owner == owner)
        reserved = sum(self._reserved.values()) if owner is None else self._reserved.get(owner, 0)
        return live + reserved

    def reserve(self, owner: str) -> None:
        """Count one sandbox about to be created for `owner`.

        Raises:
            CapacityError: the global or the per-owner cap is reached.
        """
        if self.count() >= self._max_total:
            raise CapacityError("all owners", self._max_total)
        if self.count(owner) >= self._max_per_owner:
            raise CapacityError(f"owner {owner}", self._max_per_owner)
        self._reserved[owner] = self._reserved.get(owner, 0) + 1

    def unreserve(self, owner: str) -> None:
        left = self._reserved.get(owner, 0) - 1
        if left > 0:
            self._reserved[owner] = left
        else:
            self._reserved.pop(owner, None)
