"""The tai translator: tai's own events re-sequenced into the session's turn."""

from __future__ import annotations

import json

from orchestrator.stream import (
    CountingIds,
    Event,
    LifecycleEvent,
    RandomIds,
    SessionEmitter,
    TurnBuilder,
    Usage,
    dump_event,
    event_json,
    validate_stream,
)
from runners.base import TurnRequest
from runners.tai import TaiTranslator

TURN = TurnRequest(assistant_id="a.b", owner="o", session_id="chat-1", turn_id="turn-1", prompt="hi")


def tai_lines(build: list[list[Event]]) -> list[str]:
    return [event_json(e) for batch in build for e in batch]


def kinds(events: list[Event]) -> list[str]:
    return [e.props.event if isinstance(e, LifecycleEvent) else e.type for e in events]


def session(translated: list[Event], end: TurnBuilder, status: str = "completed") -> list[Event]:
    """The outer turn as the pipeline builds it around the translated events, stamped."""
    emitter = SessionEmitter("chat-1")
    outer = [*end.stream_start("a.b"), *translated, *end.stream_end(status)]  # type: ignore[arg-type]
    return emitter.stamp_all(outer, turn_id="turn-1")


def test_events_pass_through_and_stream_end_becomes_the_outcome() -> None:
    tai = TurnBuilder(RandomIds(), runner="tai")
    usage = Usage(scope="turn", input_tokens=12, output_tokens=5)
    lines = tai_lines(
        [
            tai.stream_start("a.b"),
            tai.text("reading "),
            tai.tool_started("call-1", "read", {"path": "x"}, summary="x"),
            tai.tool_finished("call-1", "1\tx"),
            tai.text("done"),
            tai.result(result="done", num_turns=2, stop_reason="completed", usage=usage),
            tai.stream_end("completed", usage=usage),
        ]
    )
    outer = TurnBuilder(CountingIds(), runner="tai")
    tr = TaiTranslator(outer, TURN)
    out: list[Event] = []
    for line in lines:
        out += tr.feed(line)
    assert tr.finished
    out += tr.close(0, "")
    # tai's own stream_start/stream_end are gone; everything else is there, unchanged and unstamped
    expected = [json.loads(line) for line in lines[1:-1]]
    assert [dump_event(e) for e in out] == expected
    assert all(e.seq == 0 for e in out)
    assert tr.outcome.status == "completed"
    assert tr.outcome.usage == usage
    assert tr.outcome.stop_reason == "completed"
    assert tr.resume_state == {"turn_id": "turn-1"}
    assert validate_stream(session(out, outer)) == []


def test_error_stream_end_carries_its_message() -> None:
    tai = TurnBuilder(RandomIds(), runner="tai")
    lines = tai_lines(
        [
            tai.stream_start("a.b"),
            tai.error("stopped after 2 rounds", "max_rounds"),
            tai.result(result=None, is_error=True, num_turns=2, stop_reason="max_rounds"),
            tai.stream_end("error", error="stopped after 2 rounds (max_rounds)"),
        ]
    )
    tr = TaiTranslator(TurnBuilder(CountingIds()), TURN)
    out = [e for line in lines for e in tr.feed(line)]
    out += tr.close(1, "")
    assert kinds(out) == ["error", "result/summary"]
    assert tr.outcome.status == "error"
    assert tr.outcome.error == "stopped after 2 rounds (max_rounds)"
    assert tr.outcome.stop_reason == "max_rounds"
    assert tr.resume_state == {}


def test_malformed_lines_surface_as_raw_and_never_raise() -> None:
    outer = TurnBuilder(CountingIds(), runner="tai")
    tr = TaiTranslator(outer, TURN)
    not_json = tr.feed("Traceback (most recent call last):")
    not_event = tr.feed('{"type": "mystery", "props": {}}')
    huge = tr.feed("x" * 10_000)
    assert tr.feed("   ") == []
    raws = [*not_json, *not_event, *huge]
    assert kinds(raws) == ["runner/raw"] * 3
    props = [dump_event(e)["props"] for e in raws]
    assert [p["raw_type"] for p in props] == ["text", "invalid_event", "text"]
    assert props[0]["raw"]["line"] == "Traceback (most recent call last):"
    assert props[2]["raw"]["omitted_chars"] == 6_000 and len(props[2]["raw"]["line"]) == 4_000
    assert all(p["runner"] == "tai" for p in props)


def test_stamped_lines_are_restamped_by_the_session() -> None:
    tai = TurnBuilder(RandomIds(), runner="tai")
    stamped = SessionEmitter("other").stamp_all([*tai.stream_start("a.b"), *tai.text("hi")], turn_id="t9")
    tr = TaiTranslator(TurnBuilder(CountingIds()), TURN)
    out = [e for s in stamped for e in tr.feed(event_json(s))]
    assert out and all(e.seq == 0 and e.session_id == "" and e.turn_id == "" for e in out)


def test_cancel_without_stream_end_closes_what_tai_left_open() -> None:
    """Killed mid-tool inside a sub-agent thread: windows, tools and threads are closed."""
    tai = TurnBuilder(RandomIds(), runner="tai")
    child = tai.child("chat-1/agent-1")
    lines = tai_lines(
        [
            tai.stream_start("a.b"),
            tai.tool_started("call-1", "bash", {"command": "sleep 60"}),
            child.stream_start("agent"),
            child.text("looking"),
            tai.tool_started("call-2", "agent", {"prompt": "x"}, semantic_type="agent"),
        ]
    )
    outer = TurnBuilder(CountingIds(), runner="tai")
    tr = TaiTranslator(outer, TURN)
    out = [e for line in lines for e in tr.feed(line)]
    assert not tr.finished
    settled = tr.close(None, "", cancelled=True)
    assert tr.outcome.status == "cancelled"
    assert tr.resume_state == {}
    failed = [dump_event(e) for e in settled if e.type in ("execute", "agent")]
    assert {f["props"]["tool_id"] for f in failed} == {"call-1", "call-2"}
    assert all(f["props"]["status"] == "error" and f["props"]["is_error"] for f in failed)
    ends = [e for e in settled if isinstance(e, LifecycleEvent) and e.props.event == "stream_end"]
    assert [e.thread_id for e in ends] == ["chat-1/agent-1"]
    assert validate_stream(session(out + settled, outer, "cancelled")) == []
    assert tr.close(None, "") == []  # idempotent


def test_exit_130_without_stream_end_is_a_cancel_and_a_crash_is_an_error() -> None:
    tr = TaiTranslator(TurnBuilder(CountingIds()), TURN)
    assert tr.close(130, "") == []
    assert tr.outcome.status == "cancelled"

    outer = TurnBuilder(CountingIds(), runner="tai")
    crashed = TaiTranslator(outer, TURN)
    out = crashed.feed(event_json(TurnBuilder(RandomIds()).text("partial")[0]))
    events = crashed.close(1, "ImportError: no module named x; key sk-secret-abcdef123456")
    assert crashed.outcome.status == "error"
    error = dump_event(events[-1])
    assert error["type"] == "error" and error["props"]["code"] == "runner_exit"
    assert "exit code 1" in error["props"]["message"] and "ImportError" in error["props"]["message"]
    assert "sk-secret-abcdef123456" not in json.dumps(error) + (crashed.outcome.error or "")
    assert len(out) == 1
