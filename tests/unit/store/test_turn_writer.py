"""A turn's begin and end on Postgres, one statement each (`orchestrator.store.turn_writer`), and
what a refused statement leaves to the ORM path: the same rows, and the same errors, as SQLite."""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from orchestrator.store import (
    EventSequenceError,
    FinishedTurn,
    NewMessage,
    RecordExists,
    RecordNotFound,
    Store,
)
from orchestrator.store.database import lock_number
from orchestrator.store.errors import OwnerTurnsRunning, TurnRunning
from orchestrator.store.turn_writer import _OWNER_LOCK
from orchestrator.stream import SessionEmitter, Usage
from tests.unit.store.factory import turn_events

USAGE = Usage(input_tokens=10, output_tokens=3, scope="turn")


def _said(turn_id: str, *, count: int = 1) -> tuple[NewMessage, ...]:
    return tuple(
        NewMessage(id=f"{turn_id}-u{i}", role="user", content=[{"type": "text", "text": f"hi {i}"}])
        for i in range(count)
    )


def _end(session_id: str, turn_id: str, emitter: SessionEmitter, **extra: Any) -> FinishedTurn:
    return FinishedTurn(
        session_id=session_id,
        turn_id=turn_id,
        assistant_id="tests.echo",
        status="completed",
        messages=(
            NewMessage(id=f"{turn_id}-a", role="assistant", content="done", assistant_id="tests.echo"),
        ),
        events=tuple(turn_events(emitter, turn_id, "the answer", usage=USAGE)),
        usage=USAGE,
        **extra,
    )


def _no_orm_path(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ORM path of a begin and an end fails the test: the statements must do it all."""

    async def refused(*_args: object) -> None:
        raise AssertionError("the turn's statement was refused: the ORM path wrote it")

    monkeypatch.setattr(store.turns, "_begin", refused)
    monkeypatch.setattr(store.turns, "_persist", refused)


@pytest.mark.databases("postgres")
@pytest.mark.parametrize(("cap", "owner"), [(None, None), (2, None), (2, "alice")])
async def test_a_turns_begin_and_end_are_one_statement_each(
    store: Store, monkeypatch: pytest.MonkeyPatch, cap: int | None, owner: str | None
) -> None:
    store.leases.bind(lease_seconds=30.0, max_turns_per_owner=cap)
    session = (await store.sessions.create("alice", "tests.echo")).id
    await store.sessions.set_resume(session, "claude", {"session_id": "old"})
    await store.sessions.set_resume(session, "codex", {"thread": "t-9"})
    _no_orm_path(store, monkeypatch)
    emitter = SessionEmitter(session)

    await store.turns.begin(session, "t1", "tests.echo", _said("t1", count=2), owner=owner)
    running = await store.turns.get("t1")
    assert running is not None and running.status == "running" and running.usage == Usage()
    assert [(m.id, m.sequence) for m in running.messages] == [("t1-u0", 1), ("t1-u1", 2)]
    lease = await store.leases.turn_of_session(session)
    assert lease is not None and lease.turn_id == "t1" and lease.replica_id == store.leases.replica_id
    assert lease.expires_at is not None

    end = _end(session, "t1", emitter, resume={"claude": {"session_id": "new"}, "codex": None})
    record = await store.turns.persist(end)
    assert record.assistant_id == "tests.echo" and record.created_at == running.created_at
    assert [(m.id, m.sequence) for m in record.messages] == [("t1-a", 3)]
    stored = await store.turns.get("t1")
    assert stored is not None and stored.messages == running.messages + record.messages
    assert stored.model_copy(update={"messages": record.messages}) == record
    assert await store.events.after(session) == list(end.events)
    assert await store.events.last_seq(session) == end.events[-1].seq
    assert await store.leases.turn_of_session(session) is None
    assert (await store.sessions.require(session)).resume == {"claude": {"session_id": "new"}}

    await store.turns.begin(session, "t2", "tests.echo", (), owner=owner)  # no messages; no events next
    quiet = FinishedTurn(session_id=session, turn_id="t2", assistant_id="tests.echo", status="cancelled")
    assert (await store.turns.persist(quiet)).messages == ()
    assert await store.events.last_seq(session) == end.events[-1].seq
    assert [t.status for t in await store.turns.of_session(session)] == ["completed", "cancelled"]


async def test_a_refused_begin_writes_nothing_and_says_why(store: Store) -> None:
    store.leases.bind(lease_seconds=30.0, max_turns_per_owner=1)
    session = (await store.sessions.create("alice", "tests.echo")).id
    second = (await store.sessions.create("alice", "tests.echo")).id
    with pytest.raises(RecordNotFound):
        await store.turns.begin("no-such-session", "t0", "tests.echo", _said("t0"))
    await store.turns.begin(session, "t1", "tests.echo", _said("t1"))
    with pytest.raises(TurnRunning) as busy:
        await store.turns.begin(session, "t2", "tests.echo", _said("t2"))
    assert busy.value.turn_id == "t1"
    with pytest.raises(OwnerTurnsRunning):
        await store.turns.begin(second, "t3", "tests.echo", _said("t3"))
    store.leases.bind(lease_seconds=30.0)
    with pytest.raises(RecordExists):  # the turn's id is taken
        await store.turns.begin(second, "t1", "tests.echo", ())
    with pytest.raises(RecordExists):  # a message's id is taken
        await store.turns.begin(second, "t4", "tests.echo", _said("t1"))
    assert [t.id for t in await store.turns.unfinished()] == ["t1"]
    assert await store.messages.history(second) == []
    assert await store.turns.of_session(second) == []
    assert await store.leases.turn_of_session(second) is None


@pytest.mark.parametrize("owner", [None, "alice"])
async def test_an_owners_cap_holds_over_two_replicas_given_the_owner_or_not(
    store: Store, other: Store, owner: str | None
) -> None:
    for st in (store, other):
        st.leases.bind(lease_seconds=30.0, max_turns_per_owner=3)
    sessions = [(await store.sessions.create("alice", "tests.echo")).id for _ in range(10)]
    won: list[str] = []

    async def begin(st: Store, session: str, turn_id: str) -> None:
        with contextlib.suppress(OwnerTurnsRunning):
            await st.turns.begin(session, turn_id, "tests.echo", _said(turn_id), owner=owner)
            won.append(turn_id)

    async with anyio.create_task_group() as tg:
        for i, session in enumerate(sessions):
            tg.start_soon(begin, store if i % 2 else other, session, f"t{i}")
    assert len(won) == 3
    assert sorted(t.id for t in await store.turns.unfinished()) == sorted(won)


async def test_a_begin_given_another_owner_is_written_as_without_it(store: Store) -> None:
    """The owner given is checked against the session's: a wrong one takes no other owner's place
    (its lock, its count), the begin is written as one given no owner."""
    store.leases.bind(lease_seconds=30.0, max_turns_per_owner=1)
    session = (await store.sessions.create("alice", "tests.echo")).id
    second = (await store.sessions.create("alice", "tests.echo")).id
    await store.turns.begin(session, "t1", "tests.echo", _said("t1"), owner="mallory")
    with pytest.raises(OwnerTurnsRunning):  # alice's cap, counted though "mallory" was named
        await store.turns.begin(second, "t2", "tests.echo", _said("t2"), owner="mallory")
    running = await store.turns.get("t1")
    assert running is not None and [m.id for m in running.messages] == ["t1-u0"]
    assert await store.turns.get("t2") is None


async def test_a_refused_end_writes_nothing_and_says_why(store: Store) -> None:
    session = (await store.sessions.create("alice", "tests.echo")).id
    emitter = SessionEmitter(session)
    await store.turns.begin(session, "t1", "tests.echo", _said("t1"))
    end = _end(session, "t1", emitter)
    gap = FinishedTurn(
        session_id=session,
        turn_id="t1",
        assistant_id="tests.echo",
        status="completed",
        events=end.events[1:],
    )
    with pytest.raises(EventSequenceError):
        await store.turns.persist(gap)
    with pytest.raises(RecordNotFound):
        await store.turns.persist(_end("no-such-session", "t1", SessionEmitter("no-such-session")))
    assert await store.events.after(session) == []
    assert (await store.leases.turn_of_session(session)) is not None
    await store.turns.persist(end)
    with pytest.raises(RecordExists):  # ended already
        await store.turns.persist(_end(session, "t1", emitter))
    assert await store.events.after(session) == list(end.events)
    assert [m.sequence for m in await store.messages.history(session)] == [1, 2]


async def test_a_turn_no_begin_wrote_is_written_whole(store: Store) -> None:
    session = (await store.sessions.create("alice", "tests.echo")).id
    end = _end(session, "t1", SessionEmitter(session))
    record = await store.turns.persist(end)
    assert record.status == "completed" and [m.sequence for m in record.messages] == [1]
    assert await store.events.after(session) == list(end.events)


@pytest.mark.databases("postgres")
async def test_the_statements_owner_lock_is_the_orm_paths(store: Store, database_url: str) -> None:
    """`turn_writer` keys the owner's advisory lock in SQL; the ORM path (and an older replica)
    keys it in Python: one lock, or the cap would be counted twice at once."""
    session = (await store.sessions.create("alice", "tests.echo")).id
    engine = create_async_engine(database_url, poolclass=NullPool)
    try:
        async with engine.connect() as holder, engine.connect() as elsewhere:
            await holder.execute(text(_OWNER_LOCK.replace("$1", ":session")), {"session": session})
            probe = text("SELECT pg_try_advisory_xact_lock(:k)")
            assert await elsewhere.scalar(probe, {"k": lock_number("owner:alice")}) is False
            assert await elsewhere.scalar(probe, {"k": lock_number("owner:bob")}) is True
            await holder.rollback()
            assert await elsewhere.scalar(probe, {"k": lock_number("owner:alice")}) is True
    finally:
        await engine.dispose()
