"""JSON Lines: one compact event per line (the CLI's `--format jsonl`, event-log exports)."""

from __future__ import annotations

from orchestrator.stream.events import Event, event_json, parse_event


class JSONLEncoder:
    media_type = "application/jsonl"

    def encode(self, event: Event) -> str:
        return event_json(event) + "\n"

    def close(self) -> str:
        return ""


def parse_jsonl(text: str) -> list[Event]:
    """Events from JSONL text; blank lines are skipped. Raises `pydantic.ValidationError`."""
    return [parse_event(line) for line in text.splitlines() if line.strip()]
