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


async def _chat(store: Store, chat_id: str) -> str:
    return (await store.chats.create("alice", "tests.echo", chat_id=chat_id)).id


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


async def test_appends_of_many_chats_queued_together_share_one_transaction(store: Store) -> None:
    chats = [await _chat(store, f"chat-{i}") for i in range(20)]
    batches = {chat: turn_events(SessionEmitter(chat), "t1", f"reply of {chat}") for chat in chats}
    with counted_commits(store) as commits:
        lasts = await asyncio.gather(*(store.events.append(chat, batches[chat]) for chat in chats))
    assert len(commits) == 1
    assert lasts == [len(batches[chat]) for chat in chats]
    for chat in chats:
        assert await store.events.after(chat) == batches[chat]
        assert await store.events.last_seq(chat) == len(batches[chat])


async def test_a_bad_append_in_a_batch_fails_alone(store: Store) -> None:
    good, gap, dup = [await _chat(store, name) for name in ("good", "gap", "dup")]
    good_events = texts(SessionEmitter(good), 3)
    gap_events = texts(SessionEmitter(gap), 4)[1:]  # seq 1 missing
    dup_emitter = SessionEmitter(dup)
    dup_events = texts(dup_emitter, 2)
    await store.events.append(dup, dup_events)
    outcomes = await asyncio.gather(
        store.events.append(good, good_events),
        store.events.append(gap, gap_events),
        store.events.append(dup, dup_events),  # already in the log
        store.events.append("no-such-chat", texts(SessionEmitter("no-such-chat"), 1)),
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


async def test_one_chats_appends_in_one_batch_land_in_queue_order(store: Store) -> None:
    chat = await _chat(store, "ordered")
    emitter = SessionEmitter(chat)
    parts = [texts(emitter, 3) for _ in range(10)]
    with counted_commits(store) as commits:
        lasts = await asyncio.gather(*(store.events.append(chat, part) for part in parts))
    assert len(commits) == 1
    assert lasts == [3 * (n + 1) for n in range(10)]
    assert [e.seq for e in await store.events.after(chat)] == list(range(1, 31))
    assert await store.events.after(chat) == [e for part in parts for e in part]


async def test_two_writers_of_one_seq_in_one_batch_cannot_both_win(store: Store) -> None:
    chat = await _chat(store, "race")
    a, b = texts(SessionEmitter(chat), 2, "ta"), texts(SessionEmitter(chat), 2, "tb")
    outcomes = await asyncio.gather(
        store.events.append(chat, a), store.events.append(chat, b), return_exceptions=True
    )
    assert outcomes[0] == 2 and isinstance(outcomes[1], EventSequenceError)
    assert await store.events.after(chat) == a


async def test_a_log_that_disagrees_with_its_chat_row_fails_only_that_append(store: Store) -> None:
    """Rows past the chat's `last_seq` (written around the log) make the batch's insert fail: the
    batch is written again one append at a time, and only the clashing one is refused."""
    clash, other = await _chat(store, "clash"), await _chat(store, "other")
    clash_events, other_events = texts(SessionEmitter(clash), 2), texts(SessionEmitter(other), 2)
    async with store._db.write() as session:  # seq 1 in the log, but the chat row still says 0
        stray = clash_events[0]
        await session.execute(
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
    chat = await _chat(store, "cancelled")
    emitter = SessionEmitter(chat)
    first, second = texts(emitter, 2), texts(emitter, 2)
    written = asyncio.ensure_future(store.events.append(chat, first))
    dropped = asyncio.ensure_future(store.events.append(chat, second))
    await asyncio.sleep(0)  # both queued; the flush has taken only what was queued before it ran
    # Neither task has run far enough for a commit: a cancel now finds `dropped` queued or taken.
    dropped.cancel()
    assert await written == 2
    with pytest.raises(asyncio.CancelledError):
        await dropped
    logged = [e.seq for e in await store.events.after(chat)]
    assert logged in ([1, 2], [1, 2, 3, 4])  # taken: it landed whole; queued: not at all
    assert await store.events.last_seq(chat) == logged[-1]


async def test_closing_the_store_writes_what_is_queued(database_url: str) -> None:
    store = Store.from_url(database_url)
    await store.migrate()
    chat = await _chat(store, "closing")
    events = texts(SessionEmitter(chat), 5)
    pending = asyncio.ensure_future(store.events.append(chat, events))
    await asyncio.sleep(0)
    await store.aclose()
    assert await pending == 5
    reopened = Store.from_url(database_url)
    try:
        assert await reopened.events.after(chat) == events
    finally:
        await reopened.aclose()


async def test_turn_begins_and_ends_join_the_group_commit(store: Store) -> None:
    """SQLite: a turn's begin and end written meanwhile share the batch's one transaction with the
    appends, in queue order. Postgres writes each in a transaction of its own, with the same result."""
    talk, ending = await _chat(store, "talk"), await _chat(store, "ending")
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
    assert ended is not None and ended.status == "completed" and [m.id for m in ended.messages] == ["m-answer"]
    assert await store.leases.turn_of_chat(ending) is None


async def test_a_failing_turn_write_in_a_batch_fails_alone(store: Store) -> None:
    """A job of the batch that fails (a turn begun twice) undoes the batch, which is written again
    one item at a time: it alone fails, with its own error, and the others land."""
    talk, ending, other = [await _chat(store, name) for name in ("talk", "ending", "other")]
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
    twice = await store.leases.turn_of_chat(other)
    assert twice is not None and twice.turn_id == "t-twice"  # the refused begin left it as it was


def _closing(chat: str, turn_id: str, events: list[Event]) -> FinishedTurn:
    return FinishedTurn(
        chat_id=chat,
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
    chat = await _chat(store, "one-by-one")
    emitter = SessionEmitter(chat)
    for n in range(20):
        assert await asyncio.wait_for(store.events.append(chat, texts(emitter, 1)), 30) == n + 1
    assert [e.seq for e in await store.events.after(chat)] == list(range(1, 21))
