"""A turn's messages, events, usage and resume state: written together, read back after a restart."""

from __future__ import annotations

import pytest

from orchestrator.store import (
    EventSequenceError,
    FinishedTurn,
    NewMessage,
    RecordExists,
    RecordNotFound,
    Store,
)
from orchestrator.stream import SessionEmitter, Usage
from tests.unit.store.conftest import FakeClock
from tests.unit.store.factory import turn_events

USAGE = Usage(
    input_tokens=1200,
    cached_input_tokens=200,
    output_tokens=340,
    reasoning_tokens=40,
    cost_usd=0.0123,
    scope="turn",
)


def _turn(session_id: str, turn_id: str, emitter: SessionEmitter, text: str) -> FinishedTurn:
    return FinishedTurn(
        session_id=session_id,
        turn_id=turn_id,
        assistant_id="tests.echo",
        status="completed",
        messages=(
            NewMessage(id=f"{turn_id}-u", role="user", content="please list the files"),
            NewMessage(
                id=f"{turn_id}-a",
                role="assistant",
                content=[{"type": "text", "text": text}, {"type": "tool", "name": "Bash", "ok": True}],
                assistant_id="tests.echo",
            ),
        ),
        events=tuple(turn_events(emitter, turn_id, text, usage=USAGE)),
        usage=USAGE,
        resume={"claude": {"session_id": "cl-42"}},
    )


async def test_a_persisted_turn_reads_back_identical_after_a_restart(
    store: Store, database_url: str, clock: FakeClock
) -> None:
    session = await store.sessions.create("alice", "tests.echo", title="files", session_id="c1")
    turn = _turn(session.id, "t1", SessionEmitter(session.id), "here they are")
    written = await store.persist_turn(turn)
    await store.aclose()

    reopened = Store.from_url(database_url, clock=clock)
    try:
        await reopened.migrate()
        assert await reopened.turns.get("t1") == written
        assert written.usage == USAGE and written.status == "completed"
        assert [m.id for m in written.messages] == ["t1-u", "t1-a"]
        assert [m.sequence for m in written.messages] == [1, 2]
        assert written.messages[1].content == turn.messages[1].content
        assert await reopened.events.after(session.id) == list(turn.events)
        assert await reopened.messages.history(session.id) == list(written.messages)
        again = await reopened.sessions.require(session.id)
        assert again.last_seq == len(turn.events)
        assert again.resume == {"claude": {"session_id": "cl-42"}}
        assert again.title == "files" and again.created_at == session.created_at
    finally:
        await reopened.aclose()


async def test_a_turn_that_breaks_the_event_log_writes_nothing(store: Store) -> None:
    session = await store.sessions.create("alice", "tests.echo")
    emitter = SessionEmitter(session.id)
    await store.events.append(session.id, turn_events(emitter, "t0", "earlier"))
    stale = _turn(session.id, "t1", SessionEmitter(session.id), "reusing seq 1")  # a duplicate of seq 1..
    with pytest.raises(EventSequenceError):
        await store.persist_turn(stale)
    assert await store.turns.get("t1") is None
    assert await store.messages.of_turn("t1") == []
    assert await store.messages.history(session.id) == []
    assert (await store.sessions.require(session.id)).resume == {}
    logged = await store.events.after(session.id)
    assert await store.events.last_seq(session.id) == len(logged) == emitter.last_seq
    assert {e.turn_id for e in logged} == {"t0"}


async def test_turns_accumulate_usage_and_continue_message_order(store: Store, clock: FakeClock) -> None:
    session = await store.sessions.create("alice", "tests.echo")
    emitter = SessionEmitter(session.id)
    await store.persist_turn(_turn(session.id, "t1", emitter, "one"))
    clock.advance(5)
    second = await store.persist_turn(_turn(session.id, "t2", emitter, "two"))
    assert [m.sequence for m in second.messages] == [3, 4]
    assert [t.id for t in await store.turns.of_session(session.id)] == ["t1", "t2"]
    total = await store.turns.usage(session.id)
    assert total.scope == "cumulative"
    assert (total.input_tokens, total.output_tokens, total.reasoning_tokens) == (2400, 680, 80)
    assert total.cost_usd == pytest.approx(0.0246)
    assert [m.content for m in await store.messages.history(session.id, limit=1)] == [
        second.messages[1].content
    ]


async def test_resume_state_merges_and_a_none_state_removes_it(store: Store) -> None:
    session = await store.sessions.create("alice", "tests.echo")
    await store.sessions.set_resume(session.id, "codex", {"thread": "th-1"})
    await store.persist_turn(_turn(session.id, "t1", SessionEmitter(session.id), "x"))
    assert (await store.sessions.require(session.id)).resume == {
        "codex": {"thread": "th-1"},
        "claude": {"session_id": "cl-42"},
    }
    cleared = await store.sessions.set_resume(session.id, "codex", None)
    assert cleared.resume == {"claude": {"session_id": "cl-42"}}


async def test_a_turn_is_persisted_once_and_only_for_a_known_session(store: Store) -> None:
    session = await store.sessions.create("alice", "tests.echo")
    emitter = SessionEmitter(session.id)
    await store.persist_turn(_turn(session.id, "t1", emitter, "x"))
    again = _turn(session.id, "t1", emitter, "y").model_copy(update={"messages": (), "events": ()})
    with pytest.raises(RecordExists):
        await store.persist_turn(again)
    with pytest.raises(RecordNotFound):
        await store.persist_turn(_turn("ghost", "t9", SessionEmitter("ghost"), "z"))
    assert await store.turns.of_session("ghost") == []


async def test_a_turn_without_events_keeps_the_log_as_it_is(store: Store) -> None:
    session = await store.sessions.create("alice", "tests.echo")
    emitter = SessionEmitter(session.id)
    streamed = turn_events(emitter, "t1", "streamed live")
    await store.events.append(session.id, streamed)
    turn = _turn(session.id, "t1", emitter, "unused").model_copy(update={"events": ()})
    await store.persist_turn(turn)
    assert await store.events.after(session.id) == streamed
    assert len(await store.messages.of_turn("t1")) == 2


async def test_previous_is_the_sessions_last_turn_other_than_the_running_one(
    store: Store, clock: FakeClock
) -> None:
    session = await store.sessions.create("alice", "tests.echo")
    emitter = SessionEmitter(session.id)
    assert await store.turns.previous(session.id, "t-now") is None
    await store.persist_turn(_turn(session.id, "t1", emitter, "one"))
    clock.advance(1)
    await store.persist_turn(_turn(session.id, "t2", emitter, "two").model_copy(update={"status": "error"}))
    clock.advance(1)
    await store.turns.begin(session.id, "t-now", "tests.other", ())
    previous = await store.turns.previous(session.id, "t-now")
    assert previous is not None
    assert (previous.id, previous.status, previous.assistant_id) == ("t2", "error", "tests.echo")
    running = await store.turns.previous(session.id, "t2")
    assert running is not None
    assert (running.id, running.status, running.assistant_id) == ("t-now", "running", "tests.other")
