"""The contract every wire encoder keeps."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from orchestrator.stream.events import Event


class EventEncoder(Protocol):
    """Turns events into wire text. Stateful encoders (OpenAI) live for one turn; stateless ones
    may be shared."""

    media_type: str

    def encode(self, event: Event) -> str:
        """Wire text for this event; empty when the format has nothing to say about it."""
        ...

    def close(self) -> str:
        """Wire text that ends the stream (after the last event); often empty."""
        ...


def encode_all(encoder: EventEncoder, events: Iterable[Event]) -> str:
    """The whole wire text of `events`, closing included."""
    return "".join(encoder.encode(e) for e in events) + encoder.close()
