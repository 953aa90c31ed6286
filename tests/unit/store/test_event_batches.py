"""Group commit: appends queued together are written in one transaction, each with its own outcome.

Appends started in the same event-loop step are all queued before the flush runs, so the number of
transactions here is exact, not a matter of timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import insert

from orchestrator.store import (
    EventSequenceError,
    FinishedTurn,
    NewMessage,
    RecordExists,
    RecordNotFound,
    Store,
)
from orchestrator.store.tables import EventRow
from orchestrator.stream import Event, SessionEmitter, TextEvent, TextProps, dump_event
from tests.unit.store.factory import turn_events


async def _session(store: Store, session_id: str) -> str:
    return (await store.sessions.create("alice", "tests.echo", session_id=session_id)).id


@contextmanager
def counted_commits(store: Store) -> Iterator[list[int]]:
    """A list that ends up with one item per transaction the event log committed meanwhile (its
    group commits run below SQLAlchemy's engine events, one driver call each)."""
    commits: list[int] = []
    before = store.events.batches
    try:
        yield commits
    finally:
        commits.extend([1] * (store.events.batches - before))


def texts(emitter: SessionEmitter, count: int, turn_id: str = "t") -> list[Event]:
    return [emitter.stamp(TextEvent(props=TextProps(content=f"#{i}")), turn_id=turn_id) for i in range(count)]


async def test_appends_of_many_sessions_queued_together_share_one_transaction(store: Store) -> None:
    sessions = [await _session(store, f"chat-{i}") for i in range(20)]
    batches = {
        session: turn_events(SessionEmitter(session), "t1", f"reply of {session}") for session in sessions
    }
    with counted_commits(store) as commits:
        lasts = await asyncio.gather(
            *(store.events.append(session, batches[session]) for session in sessions)
        )
    assert len(commits) == 1
    assert lasts == [len(batches[session]) for session in sessions]
    for session in sessions:
        assert await store.events.after(session) == batches[session]
        assert await store.events.last_seq(session) == len(batches[session])


async def test_a_bad_append_in_a_batch_fails_alone(store: Store) -> None:
    good, gap, dup = [await _session(store, name) for name in ("good", "gap", "dup")]
    good_events = texts(SessionEmitter(good), 3)
    gap_events = texts(SessionEmitter(gap), 4)[1:]  # seq 1 missing
    dup_emitter = SessionEmitter(dup)
    dup_events = texts(dup_emitter, 2)
    await store.events.append(dup, dup_events)
    outcomes = await asyncio.gather(
        store.events.append(good, good_events),
        store.events.append(gap, gap_events),
        store.events.append(dup, dup_events),  # already in the log
        store.events.append("no-such-session", texts(SessionEmitter("no-such-session"), 1)),
        return_exceptions=True,
    )
    assert outcomes[0] == 3
    assert isinstance(outcomes[1], EventSequenceError) and (outcomes[1].expected, outcomes[1].got) == (1, 2)
    assert isinstance(outcomes[2], EventSequenceError) and "duplicate" in str(outcomes[2])
    assert isinstance(outcomes[3], RecordNotFound)
    assert await store.events.after(good) == good_events
    assert await store.events.after(gap) == []
    assert await store.events.last_seq(gap) == 0
    assert await store.events.after(dup) == dup_events


async def test_one_sessions_appends_in_one_batch_land_in_queue_order(store: Store) -> None:
    session = await _session(store, "ordered")
    emitter = SessionEmitter(session)
    parts = [texts(emitter, 3) for _ in range(10)]
    with counted_commits(store) as commits:
        lasts = await asyncio.gather(*(store.events.append(session, part) for part in parts))
    assert len(commits) == 1
    assert lasts == [3 * (n + 1) for n in range(10)]
    assert [e.seq for e in await store.events.after(session)] == list(range(1, 31))
    assert await store.events.after(session) == [e for part in parts for e in part]


async def test_two_writers_of_one_seq_in_one_batch_cannot_both_win(store: Store) -> None:
    session = await _session(store, "race")
    a, b = texts(SessionEmitter(session), 2, "ta"), texts(SessionEmitter(session), 2, "tb")
    outcomes = await asyncio.gather(
        store.events.append(session, a), store.events.append(session, b), return_exceptions=True
    )
    assert outcomes[0] == 2 and isinstance(outcomes[1], EventSequenceError)
    assert await store.events.after(session) == a


async def test_a_log_that_disagrees_with_its_session_row_fails_only_that_append(store: Store) -> None:
    """Rows past the session's `last_seq` (written around the log) make the batch's insert fail: the
    batch is written again one append at a time, and only the clashing one is refused."""
    clash, other = await _session(store, "clash"), await _session(store, "other")
    clash_events, other_events = texts(SessionEmitter(clash), 2), texts(SessionEmitter(other), 2)
    async with store._db.write() as tx:  # seq 1 in the log, but the session row still says 0
        stray = clash_events[0]
        await tx.execute(
            insert(EventRow),
            [
                {
                    "session_id": clash,
                    "seq": 1,
                    "turn_id": "t",
                    "type": stray.type,
                    "payload": dump_event(stray),
                    "ts": stray.ts,
                }
            ],
        )
    outcomes = await asyncio.gather(
        store.events.append(clash, clash_events),
        store.events.append(other, other_events),
        return_exceptions=True,
    )
    assert isinstance(outcomes[0], EventSequenceError)
    assert outcomes[1] == 2
    assert await store.events.after(other) == other_events
    assert await store.events.last_seq(clash) == 0


async def test_an_append_cancelled_before_its_batch_is_never_written(store: Store) -> None:
    session = await _session(store, "cancelled")
    emitter = SessionEmitter(session)
    first, second = texts(emitter, 2), texts(emitter, 2)
    written = asyncio.ensure_future(store.events.append(session, first))
    dropped = asyncio.ensure_future(store.events.append(session, second))
    await asyncio.sleep(0)  # both queued; the flush has taken only what was queued before it ran
    # Neither task has run far enough for a commit: a cancel now finds `dropped` queued or taken.
    dropped.cancel()
    assert await written == 2
    with pytest.raises(asyncio.CancelledError):
        await dropped
    logged = [e.seq for e in await store.events.after(session)]
    assert logged in ([1, 2], [1, 2, 3, 4])  # taken: it landed whole; queued: not at all
    assert await store.events.last_seq(session) == logged[-1]


async def test_closing_the_store_writes_what_is_queued(database_url: str) -> None:
    store = Store.from_url(database_url)
    await store.migrate()
    session = await _session(store, "closing")
    events = texts(SessionEmitter(session), 5)
    pending = asyncio.ensure_future(store.events.append(session, events))
    await asyncio.sleep(0)
    await store.aclose()
    assert await pending == 5
    reopened = Store.from_url(database_url)
    try:
        assert await reopened.events.after(session) == events
    finally:
        await reopened.aclose()


async def test_turn_begins_and_ends_join_the_group_commit(store: Store) -> None:
    """SQLite: a turn's begin and end written meanwhile share the batch's one transaction with the
    appends, in queue order. Postgres writes each in a transaction of its own, with the same result."""
    talk, ending = await _session(store, "talk"), await _session(store, "ending")
    await store.turns.begin(ending, "t-end", "tests.echo", ())
    talk_events = texts(SessionEmitter(talk), 3)
    end_events = texts(SessionEmitter(ending), 2, "t-end")
    user = (NewMessage(id="m-user", role="user", content="hi"),)
    with counted_commits(store) as commits:
        outcomes = await asyncio.gather(
            store.events.append(talk, talk_events),
            store.turns.begin(talk, "t-talk", "tests.echo", user),
            store.persist_turn(_closing(ending, "t-end", end_events)),
        )
    assert outcomes[0] == 3 and outcomes[1] is None and outcomes[2].status == "completed"
    if store.url.get_backend_name() == "sqlite":
        assert len(commits) == 1
    assert await store.events.after(talk) == talk_events
    assert await store.events.after(ending) == end_events
    begun = await store.turns.get("t-talk")
    assert begun is not None and begun.status == "running" and [m.id for m in begun.messages] == ["m-user"]
    ended = await store.turns.get("t-end")
    assert (
        ended is not None and ended.status == "completed" and [m.id for m in ended.messages] == ["m-answer"]
    )
    assert await store.leases.turn_of_session(ending) is None


async def test_a_failing_turn_write_in_a_batch_fails_alone(store: Store) -> None:
    """A job of the batch that fails (a turn begun twice) undoes the batch, which is written again
    one item at a time: it alone fails, with its own error, and the others land."""
    talk, ending, other = [await _session(store, name) for name in ("talk", "ending", "other")]
    await store.turns.begin(ending, "t-end", "tests.echo", ())
    await store.turns.begin(other, "t-twice", "tests.echo", ())
    talk_events = texts(SessionEmitter(talk), 3)
    end_events = texts(SessionEmitter(ending), 2, "t-end")
    outcomes = await asyncio.gather(
        store.events.append(talk, talk_events),
        store.turns.begin(other, "t-twice", "tests.echo", ()),
        store.persist_turn(_closing(ending, "t-end", end_events)),
        return_exceptions=True,
    )
    assert outcomes[0] == 3 and isinstance(outcomes[1], RecordExists)
    assert not isinstance(outcomes[2], BaseException) and outcomes[2].status == "completed"
    assert await store.events.after(talk) == talk_events
    assert await store.events.after(ending) == end_events
    twice = await store.leases.turn_of_session(other)
    assert twice is not None and twice.turn_id == "t-twice"  # the refused begin left it as it was


def _closing(session: str, turn_id: str, events: list[Event]) -> FinishedTurn:
    return FinishedTurn(
        session_id=session,
        turn_id=turn_id,
        assistant_id="tests.echo",
        status="completed",
        messages=(NewMessage(id="m-answer", role="assistant", content="done"),),
        events=tuple(events),
    )


async def test_appends_one_after_the_other_each_get_written(store: Store) -> None:
    """Each append here finds the flush that wrote the one before ending (closing its connection,
    which waits when the pool is full and the connection is closed for real): an append queued
    while the flush ends starts no flush of its own, so the ending one must write it (under load
    one stayed queued for ever, and its turn hung)."""
    session = await _session(store, "one-by-one")
    emitter = SessionEmitter(session)
    for n in range(20):
        assert await asyncio.wait_for(store.events.append(session, texts(emitter, 1)), 30) == n + 1
    assert [e.seq for e in await store.events.after(session)] == list(range(1, 21))
