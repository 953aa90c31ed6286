"""Websocket frames: each event is one text frame holding its JSON."""

from __future__ import annotations

from orchestrator.stream.events import Event, event_json


class WebSocketEncoder:
    """`encode` returns the text of one frame; the session protocol around it sends it as is."""

    media_type = "application/json"

    def encode(self, event: Event) -> str:
        return event_json(event)

    def close(self) -> str:
        return ""
