"""validate_stream: a valid stream passes, and each rule catches its own kind of breakage."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.errors import ProtocolError
from orchestrator.stream import (
    CountingIds,
    Event,
    SessionEmitter,
    TurnBuilder,
    check_stream,
    dump_event,
    validate_stream,
)
from tests.golden.stream.scenario import build_turn, ticking


def _dicts() -> list[dict[str, Any]]:
    return [dump_event(e) for e in build_turn()]


def _index(events: list[dict[str, Any]], event: str, type_: str | None = None) -> int:
    for i, e in enumerate(events):
        if e["type"] == "event" and e["props"]["event"] == event and type_ in (None, e["props"].get("type")):
            return i
    raise AssertionError(f"no {event} in the stream")


def _renumber(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for seq, e in enumerate(events, start=1):
        e["seq"] = seq
    return events


def _one(problems: list[str], *needles: str) -> None:
    assert len(problems) == 1, problems
    for needle in needles:
        assert needle in problems[0], problems


def test_valid_stream_from_dicts_and_models_passes() -> None:
    assert validate_stream(_dicts()) == []
    assert validate_stream(build_turn()) == []
    check_stream(_dicts())


def test_unparseable_event_is_reported_with_its_index() -> None:
    events = _dicts()
    events[3]["props"]["bogus"] = True
    _one(validate_stream(events), "event #3", "not a protocol event", "bogus")


def test_seq_gap_is_caught() -> None:
    events = _dicts()
    for e in events[5:]:
        e["seq"] += 1
    _one(validate_stream(events), "seq follows 5, expected 6")


def test_seq_going_backwards_is_caught() -> None:
    events = _dicts()
    events[4]["seq"], events[5]["seq"] = events[5]["seq"], events[4]["seq"]
    problems = validate_stream(events)
    assert any("expected 5" in p for p in problems), problems


def test_unstamped_events_fail_a_stamped_check() -> None:
    events = [dump_event(e) for e in TurnBuilder(CountingIds()).stream_start("a.b")]
    _one(validate_stream(events, complete=False), "not stamped")


def test_ts_going_backwards_is_caught() -> None:
    events = _dicts()
    events[6]["ts"] = events[5]["ts"] - 1
    _one(validate_stream(events), "ts", "before the previous")


def test_mixed_sessions_are_caught() -> None:
    events = _dicts()
    events[2]["session_id"] = "someone-else"
    _one(validate_stream(events), "session_id")


def test_stream_start_must_come_first() -> None:
    events = _dicts()
    events[0], events[1] = events[1], events[0]
    problems = validate_stream(_renumber(events))
    assert any("does not begin with stream_start" in p for p in problems), problems


def test_events_after_stream_end_are_caught() -> None:
    events = _dicts()
    events.append({**events[11], "seq": len(events) + 1, "ts": events[-1]["ts"]})
    _one(validate_stream(events), "after the stream_end")


def test_second_stream_end_is_caught() -> None:
    events = _dicts()
    events.append({**events[-1], "seq": len(events) + 1})
    _one(validate_stream(events), "after the stream_end")


def test_missing_stream_end_is_caught_unless_the_tail_is_live() -> None:
    events = _dicts()[:-1]
    problems = validate_stream(events)
    assert any("has no stream_end" in p for p in problems), problems
    assert any("still open" not in p for p in problems)
    assert validate_stream(events, complete=False) == []


def test_unclosed_message_at_stream_end_is_caught() -> None:
    events = _dicts()
    del events[_index(events, "message_end", "thinking")]
    problems = validate_stream(_renumber(events))
    assert any("message 'thinking-1' is still open" in p for p in problems), problems


def test_message_end_without_start_is_caught() -> None:
    events = _dicts()
    del events[_index(events, "message_start", "text")]
    problems = validate_stream(_renumber(events))
    assert any("'text-1' ends without message_start" in p for p in problems), problems
    assert any("'text-1' has no open window" in p for p in problems), problems


def test_message_end_of_another_type_is_caught() -> None:
    events = _dicts()
    events[_index(events, "message_end", "text")]["props"]["type"] = "thinking"
    _one(validate_stream(events), "opened as text, ends as thinking")


def test_window_opened_twice_is_caught() -> None:
    events = _dicts()
    i = _index(events, "message_start", "text")
    events.insert(i + 1, dict(events[i]))
    _one(validate_stream(_renumber(events)), "'text-1' is already open")


def test_delta_outside_its_window_is_caught() -> None:
    events = _dicts()
    delta = next(e for e in events if e["type"] == "text")
    events.insert(1, {**delta})
    problems = validate_stream(_renumber(events))
    assert any("has no open window" in p for p in problems), problems


def test_delta_without_message_id_is_caught() -> None:
    events = _dicts()
    i = next(i for i, e in enumerate(events) if e["type"] == "text")
    del events[i]["message_id"]
    _one(validate_stream(events), "delta without a message_id")


def test_delta_of_the_wrong_type_for_its_window_is_caught() -> None:
    events = _dicts()
    i = next(i for i, e in enumerate(events) if e["type"] == "thinking")
    events[i]["type"] = "text"
    _one(validate_stream(events), "text content in thinking message")


def _nested(*, close_child: bool = True, reuse: bool = False) -> list[Event]:
    b = TurnBuilder(CountingIds(), clock=ticking(0, 1))
    a, c = b.child("th-a"), b.child("th-b")
    raw = b.stream_start("root") + a.stream_start("helper.a") + c.stream_start("helper.b")
    raw += a.text("from a") + c.text("from b") + a.stream_end()
    if close_child:
        raw += c.stream_end()
    if reuse:
        raw += b.child("th-a").stream_start("again")
    raw += b.stream_end()
    return SessionEmitter("s", clock=ticking(1000, 1)).stamp_all(raw, turn_id="t")


def test_interleaved_threads_that_close_pass() -> None:
    assert validate_stream(_nested()) == []


def test_thread_left_open_at_stream_end_is_caught() -> None:
    problems = validate_stream(_nested(close_child=False))
    assert any("thread 'th-b' is still open" in p for p in problems), problems
    assert any("message 'text-2' is still open" in p for p in problems), problems


def test_thread_started_twice_is_caught() -> None:
    problems = validate_stream(_nested(reuse=True))
    assert any("thread 'th-a' started twice" in p for p in problems), problems


def test_event_of_a_thread_that_is_not_open_is_caught() -> None:
    events = [dump_event(e) for e in _nested()]
    events[1]["thread_id"] = "th-x"  # the first child's stream_start now opens th-x instead of th-a
    problems = validate_stream(events)
    assert any("thread 'th-a' is not open" in p for p in problems), problems


def test_a_turn_starting_before_the_previous_ended_is_caught() -> None:
    b1, b2 = TurnBuilder(CountingIds()), TurnBuilder(CountingIds())
    em = SessionEmitter("s", clock=ticking(0, 1))
    events = em.stamp_all(b1.stream_start("a"), turn_id="t1") + em.stamp_all(
        b2.stream_start("a"), turn_id="t2"
    )
    events += em.stamp_all(b2.stream_end(), turn_id="t2") + em.stamp_all(b1.stream_end(), turn_id="t1")
    problems = validate_stream(events)
    assert any("turn 't2' starts while 't1' is open" in p for p in problems), problems
    assert any("turn 't1' resumes after another turn" in p for p in problems), problems


def test_check_stream_raises_with_every_problem() -> None:
    events = _dicts()[:-1]
    del events[2]
    with pytest.raises(ProtocolError) as info:
        check_stream(events)
    assert len(info.value.problems) >= 2
    assert "stream protocol violated" in str(info.value)
