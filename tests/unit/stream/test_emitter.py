"""SessionEmitter: the only stamper of seq/ts; gap-free across turns, resumable, ts monotonic."""

from __future__ import annotations

import pytest

from orchestrator.errors import ProtocolError
from orchestrator.stream import CountingIds, Event, SessionEmitter, TurnBuilder, validate_stream


def _turn(text: str) -> list[Event]:
    b = TurnBuilder(CountingIds(), clock=lambda: 0)
    return b.stream_start("a.b") + b.text(text) + b.stream_end()


def test_seq_is_gap_free_across_turns_and_stamps_the_envelope() -> None:
    em = SessionEmitter("s-1", clock=iter(range(100, 200)).__next__)
    first = em.stamp_all(_turn("one"), turn_id="t1")
    second = em.stamp_all(_turn("two"), turn_id="t2")
    events = first + second
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {e.session_id for e in events} == {"s-1"}
    assert [e.turn_id for e in events] == ["t1"] * len(first) + ["t2"] * len(second)
    assert [e.ts for e in events] == list(range(100, 100 + len(events)))
    assert em.last_seq == len(events) and em.next_seq == len(events) + 1
    assert validate_stream(events) == []


def test_resumed_emitter_continues_after_the_stored_last_seq() -> None:
    em = SessionEmitter("s", clock=lambda: 5_000)
    stored = em.stamp_all(_turn("one"), turn_id="t1")
    resumed = SessionEmitter.resume("s", stored[-1].seq, last_ts=stored[-1].ts, clock=lambda: 6_000)
    more = resumed.stamp_all(_turn("two"), turn_id="t2")
    assert more[0].seq == stored[-1].seq + 1
    assert validate_stream(stored + more) == []
    assert SessionEmitter.resume("empty", 0).next_seq == 1


def test_ts_never_goes_back_when_the_wall_clock_does() -> None:
    events = _turn("x")
    readings = iter([1_000, 900, 950] + [1_200] * (len(events) - 3))
    em = SessionEmitter("s", clock=readings.__next__)
    stamped = em.stamp_all(events, turn_id="t")
    assert [e.ts for e in stamped] == [1_000, 1_000, 1_000] + [1_200] * (len(events) - 3)


def test_resume_clamps_ts_to_the_stored_last_ts() -> None:
    em = SessionEmitter.resume("s", 10, last_ts=2_000, clock=lambda: 1_500)
    assert em.stamp(_turn("x")[0], turn_id="t").ts == 2_000


def test_stamping_a_stamped_event_is_refused() -> None:
    em = SessionEmitter("s")
    event = em.stamp(_turn("x")[0], turn_id="t")
    with pytest.raises(ProtocolError, match="already stamped"):
        em.stamp(event, turn_id="t")
    assert em.last_seq == 1


def test_next_seq_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SessionEmitter("s", next_seq=0)


def test_every_stamped_event_is_redacted_text_thinking_tool_input_and_message_end() -> None:
    from orchestrator.redaction import register_secret

    secret = "canary-secret-5be1f07d"
    register_secret(secret)
    b = TurnBuilder(CountingIds(), clock=lambda: 0)
    events = (
        b.stream_start("a.b")
        + b.thinking(f"I will print {secret}")
        + b.text(f"the key is {secret}")
        + b.tool_started("t1", "Bash", {"command": f"echo {secret}", "timeout": 5})
        + b.tool_input_delta("t1", f'{{"command": "{secret}"')
        + b.tool_finished("t1", "done")
        + b.stream_end()
    )
    assert any(secret in e.model_dump_json() for e in events)  # the builder alone lets them through
    stamped = SessionEmitter("s").stamp_all(events, turn_id="t")
    assert all(secret not in e.model_dump_json() for e in stamped)
    inputs = [e.props.input for e in stamped if e.type == "execute" and e.props.input]
    assert inputs and all(
        i == {"command": "echo ***", "timeout": 5} for i in inputs
    )  # shape and numbers kept
    ends = [e for e in stamped if e.type == "event" and e.props.event == "message_end"]
    assert ends and all("***" in e.model_dump_json() for e in ends[:2])
    assert validate_stream(stamped) == []
