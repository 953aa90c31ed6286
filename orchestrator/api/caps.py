"""`OwnerCaps`: how many websockets, SSE follows and running turns one owner may hold at once.

A user may open any number of sessions, so one turn per session bounds nothing; each open connection
also holds a live queue of events. Past a cap the request is refused with 429 (`CapacityError`)
before anything is opened. One event loop uses this, so plain counters suffice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from orchestrator.errors import CageError, CapacityError

Held = Literal["websocket", "event stream", "running turn"]


class OwnerCapReached(CapacityError):
    """One owner holds as many websockets, event streams or running turns as its cap (429)."""

    code = "owner_cap_reached"

    def __init__(self, owner: str, limit: int, kind: Held) -> None:
        self.scope = f"owner {owner}"
        self.limit = limit
        CageError.__init__(self, f"concurrent {kind} limit reached for owner {owner}: at most {limit}")


class OwnerCaps:
    def __init__(self, limits: dict[Held, int]) -> None:
        self._limits = limits
        self._held: dict[Held, Counter[str]] = {kind: Counter() for kind in limits}

    def take(self, kind: Held, owner: str) -> None:
        """Count one more `kind` for `owner`.

        Raises:
            OwnerCapReached: the owner holds as many as its cap already.
        """
        limit = self._limits[kind]
        held = self._held[kind]
        if held[owner] >= limit:
            raise OwnerCapReached(owner, limit, kind)
        held[owner] += 1

    def give_back(self, kind: Held, owner: str) -> None:
        held = self._held[kind]
        held[owner] -= 1
        if held[owner] <= 0:
            del held[owner]

    @contextmanager
    def hold(self, kind: Held, owner: str) -> Iterator[None]:
        self.take(kind, owner)
        try:
            yield
        finally:
            self.give_back(kind, owner)

    def held(self, kind: Held, owner: str) -> int:
        return self._held[kind][owner]
