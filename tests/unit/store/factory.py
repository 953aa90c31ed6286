"""Realistic stamped turns for the store tests, built with the stream package's own builder."""

from __future__ import annotations

from orchestrator.stream import CountingIds, Event, SessionEmitter, TurnBuilder, Usage


def turn_events(
    emitter: SessionEmitter, turn_id: str, text: str, *, usage: Usage | None = None
) -> list[Event]:
    """stream_start, thinking, a tool run, the answer, usage and stream_end, stamped by `emitter`."""
    ticks = iter(range(1_000, 10_000))
    b = TurnBuilder(CountingIds(), runner="claude", clock=lambda: next(ticks))
    events = b.stream_start("tests.echo", session_id=emitter.session_id)
    events += b.thinking("let me look")
    events += b.tool_started("tool-1", "Bash", {"command": "ls -la"})
    events += b.tool_finished("tool-1", "total 0\n")
    events += b.text(text[: len(text) // 2])
    events += b.text(text[len(text) // 2 :])
    if usage is not None:
        events += b.usage(usage)
    events += b.stream_end()
    return emitter.stamp_all(events, turn_id=turn_id)
