"""`LoadGate`: root turns wait at the door while this process's event path is congested.

An event reaches a client after the group commit that carries it is durable (`SessionHub`) and
the client's connection has taken it from its queue. A server that runs every turn sent to it at
once shares that commit and its event loop among all of them, and under a load that saturates it
an event waits behind the other turns' work: at 50 busy sessions on a 2-core machine, 8 ms from
its stamp to its commit alone (p50), against 1 ms for one session. The gate keeps the number of
root turns running at once where the event path keeps up and lets the others wait, in arrival
order, before anything of them runs: about as many turns a second, with the events of every
running turn at their clients in milliseconds. The queue moves to the door.

How many run at once is an adaptive limit, additive increase and multiplicative decrease as in
TCP's congestion window (`AdaptiveLimit`). While the limit could matter (at least `floor` turns
run), a timer takes a sample every `interval`: the mean delay of the events live subscribers were
waiting for since the last sample, from their stamp to the subscriber (`SessionHub.subscribe`).
An event a slow reader left queued measures the reader, not the server, so it does not count: a
hostile client must not be able to close the door on everyone. Nor does the loop's own lag: a
loop slowed by another process, while its turns wait on models, delays no one's events, and
holding turns back would help no one. A sample over the target lowers the limit; one under it,
with turns waiting at a full limit, raises it by one. The target is `delay_target`, or 1.5 times
the path's floor where that is higher (`DelayFloor`: a remote database whose commit alone takes
5 ms is not congested at 5 ms).

A turn that waits on a model or a container holds a place but delays no event, so the limit grows
to let the others in; `floor` turns are always admitted, so a slow path never stops turns
outright; a turn that waits longer than `max_wait` is refused (`Overloaded`, HTTP 429), never left
waiting for ever. Sub-agent calls run in their root turn's place: only root turns pass here (a
child waiting for a place its parent holds would deadlock).

Each process gates its own event path: replicas behind one balancer each admit what they serve.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from orchestrator.errors import CageError, CapacityError, Conflict

DECREASE = 0.9
"""The factor a congested sample applies to the limit (at most the turns running then)."""
SAMPLE_INTERVAL = 0.005
"""Seconds between two samples while the limit could matter."""
TOLERANCE = 1.5
"""A delay up to this many times the event path's floor is not congestion."""
FLOOR_SPAN = 10.0
"""Seconds a low delay counts towards the floor (`DelayFloor`)."""
_CLOSED = "the server is shutting down; the turn was not started"


class Overloaded(CapacityError):
    """A root turn waited at this process's door longer than it may (429); `retry_after` says when
    to come back."""

    code = "server_busy"
    retry_after = 1.0

    def __init__(self, waited: float, limit: int) -> None:
        self.scope = "this server"
        self.limit = limit
        CageError.__init__(
            self,
            f"the server had no room for the turn within {waited:g} s ({limit} turns running, its "
            "event path congested); nothing was started, retry later",
        )


@dataclass
class DelayFloor:
    """The lowest mean event delay of the last `span` to `2 * span` seconds (a windowed minimum, as
    BBR's round-trip floor): what an event costs here when nothing waits. Old lows expire, so a
    database that became slower for good moves the floor up."""

    span: float = FLOOR_SPAN
    _current: float = math.inf
    _previous: float = math.inf
    _started: float | None = None

    def add(self, delay: float, now: float) -> None:
        if self._started is None:
            self._started = now
        elif now - self._started >= self.span:
            self._previous, self._current, self._started = self._current, math.inf, now
        self._current = min(self._current, delay)

    @property
    def value(self) -> float:
        """The floor, or 0 before any delay was seen."""
        low = min(self._current, self._previous)
        return 0.0 if math.isinf(low) else low


@dataclass
class AdaptiveLimit:
    """How many root turns may run at once, moved by samples of the event delay (pure)."""

    floor: int
    limit: float = field(init=False)

    def __post_init__(self) -> None:
        self.limit = float(self.floor)

    @property
    def places(self) -> int:
        return max(self.floor, int(self.limit))

    def observe(self, delay: float, target: float, running: int, waiting: int) -> None:
        """One sample of the delay against the target (seconds), with the turns running and
        waiting as it was taken."""
        if delay > target:
            self.limit = max(float(self.floor), min(self.limit, float(running)) * DECREASE)
        elif waiting and running >= self.places:
            self.limit = float(self.places + 1)


class _Ticket:
    """One turn at the door: set once a place is handed to it."""

    __slots__ = ("admitted", "event")

    def __init__(self) -> None:
        self.admitted = False
        self.event = anyio.Event()


Release = Callable[[], None]


class LoadGate:
    """The door of this process's root turns (see the module docstring)."""

    def __init__(
        self,
        *,
        floor: int = 2,
        delay_target: float = 0.0012,
        max_wait: float = 60.0,
        interval: float = SAMPLE_INTERVAL,
    ) -> None:
        if floor < 1:
            raise ValueError("floor must be at least 1")
        self._limit = AdaptiveLimit(floor=floor)
        self._delay_target = delay_target
        self._floor = DelayFloor()
        self._max_wait = max_wait
        self._interval = interval
        self._waiting: deque[_Ticket] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._delays = 0.0
        self._events = 0
        """The event delays reported since the last sample: their sum and their count."""
        self._closed = False
        self.running = 0
        """Root turns holding a place."""
        self.waited = 0
        """Turns that found no place at once and waited (a counter, for the metrics)."""
        self.refused = 0
        """Turns refused after waiting `max_wait` (a counter, for the metrics)."""

    @property
    def limit(self) -> int:
        """Root turns admitted at once now."""
        return self._limit.places

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def target(self) -> float:
        """The delay over which a sample is congestion now."""
        return max(self._delay_target, TOLERANCE * self._floor.value)

    def observe(self, delay: float) -> None:
        """An event's delay from its stamp to a live subscriber (seconds), from the hub."""
        self._delays += delay
        self._events += 1

    async def enter(self) -> Release:
        """Wait for a place, in arrival order; the returned callable gives it back (once).

        Raises:
            Overloaded: no place within `max_wait`.
            Conflict: the gate was closed (the server is shutting down).
        """
        if self._closed:
            raise Conflict(_CLOSED)
        if not self._waiting and self.running < self._limit.places:
            self._take()
            return self._releaser()
        ticket = _Ticket()
        self._waiting.append(ticket)
        self.waited += 1
        self._arm()
        try:
            with anyio.move_on_after(self._max_wait):
                await ticket.event.wait()
        except BaseException:
            self._leave(ticket)
            raise
        if ticket.admitted:
            return self._releaser()
        if self._closed:
            raise Conflict(_CLOSED)
        self._leave(ticket)
        self.refused += 1
        raise Overloaded(self._max_wait, self._limit.places)

    def close(self) -> None:
        """Admit no more turns: those waiting are refused at once (`Conflict`), sampling stops.
        The places of the turns running are still given back as they end."""
        self._closed = True
        while self._waiting:
            self._waiting.popleft().event.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _leave(self, ticket: _Ticket) -> None:
        """A ticket that stops waiting: out of the queue, or its place given back."""
        if ticket.admitted:
            self._give_back()
        elif ticket in self._waiting:
            self._waiting.remove(ticket)

    def _take(self) -> None:
        self.running += 1
        self._arm()

    def _releaser(self) -> Release:
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._give_back()

        return release

    def _give_back(self) -> None:
        self.running -= 1
        self._admit()

    def _admit(self) -> None:
        """Hand the free places to the turns waiting longest."""
        while self._waiting and self.running < self._limit.places:
            ticket = self._waiting.popleft()
            ticket.admitted = True
            ticket.event.set()
            self._take()

    def _arm(self) -> None:
        """Sample while the limit could matter: as long as `floor` turns run."""
        if self._timer is None and not self._closed and self.running >= self._limit.floor:
            loop = asyncio.get_running_loop()
            due = loop.time() + self._interval
            self._timer = loop.call_at(due, self._sample, due)

    def _sample(self, due: float) -> None:
        self._timer = None
        mean = 0.0
        if self._events:
            mean = self._delays / self._events
            self._floor.add(mean, due)
            self._delays, self._events = 0.0, 0
        self._limit.observe(mean, self.target, self.running, len(self._waiting))
        self._admit()
        self._arm()
