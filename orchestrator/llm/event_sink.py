"""`EventSink`: builds protocol events and hands them on in order, even from concurrent tasks."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import anyio

from orchestrator.stream import Emit, Event


class EventSink:
    """Serialises `TurnBuilder` calls and their emission.

    Parallel tools and sub-agents share one builder; building and emitting under one lock keeps
    the events in the order the builder produced them.
    """

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._lock = anyio.Lock()

    async def __call__(self, make: Callable[[], Sequence[Event]]) -> None:
        async with self._lock:
            events = make()
            if events:
                await self._emit(events)


def collecting() -> tuple[list[Event], Emit]:
    """A list and an `Emit` that appends to it (tests, the tai CLI's buffer)."""
    events: list[Event] = []

    async def emit(batch: Sequence[Event]) -> None:
        events.extend(batch)

    return events, emit
