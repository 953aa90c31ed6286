"""Native server-sent events: `id: <seq>` (so `Last-Event-ID` can resume) and the event JSON."""

from __future__ import annotations

from orchestrator.stream.events import Event, event_json


class SSEEncoder:
    """`id: <seq>\\ndata: <event json>\\n\\n` per event; the stream ends with the HTTP response."""

    media_type = "text/event-stream"

    def encode(self, event: Event) -> str:
        return f"id: {event.seq}\ndata: {event_json(event)}\n\n"

    def close(self) -> str:
        return ""
