"""The per-session event log: exact continuation, refusal of gaps and duplicates, ordered replay."""

from __future__ import annotations

import anyio
import pytest

from orchestrator.errors import UsageError
from orchestrator.store import EventSequenceError, RecordNotFound, Store
from orchestrator.stream import Event, SessionEmitter, TextEvent, TextProps, dump_event
from tests.unit.store.factory import turn_events


async def _session(store: Store, session_id: str = "chat-1") -> str:
    return (await store.sessions.create("alice", "tests.echo", session_id=session_id)).id


async def test_append_then_after_replays_every_event_in_seq_order(store: Store) -> None:
    sid = await _session(store)
    emitter = SessionEmitter(sid)
    first = turn_events(emitter, "t1", "hello there")
    second = turn_events(emitter, "t2", "general kenobi")
    assert await store.events.append(sid, first) == len(first)
    assert await store.events.append(sid, second) == len(first) + len(second)

    replay = await store.events.after(sid)
    assert replay == first + second
    assert [e.seq for e in replay] == list(range(1, len(first) + len(second) + 1))
    assert [dump_event(e) for e in replay] == [dump_event(e) for e in first + second]
    assert await store.events.last_seq(sid) == len(first) + len(second)
    assert (await store.sessions.require(sid)).last_seq == len(first) + len(second)


async def test_after_seq_returns_only_the_rest_and_pages_with_limit(store: Store) -> None:
    sid = await _session(store)
    events = turn_events(SessionEmitter(sid), "t1", "a reply long enough")
    await store.events.append(sid, events)

    rest = await store.events.after(sid, after_seq=4)
    assert [e.seq for e in rest] == list(range(5, len(events) + 1))
    page = await store.events.after(sid, after_seq=2, limit=3)
    assert [e.seq for e in page] == [3, 4, 5]
    assert await store.events.after(sid, after_seq=len(events)) == []


async def test_after_is_ordered_even_when_written_in_many_small_appends(store: Store) -> None:
    sid = await _session(store)
    emitter = SessionEmitter(sid)
    events = [emitter.stamp(TextEvent(props=TextProps(content=str(i))), turn_id="t") for i in range(1, 40)]
    for ev in events:
        await store.events.append(sid, [ev])
    replay = await store.events.after(sid, after_seq=10, limit=100)
    assert [e.seq for e in replay] == list(range(11, 40))
    assert [e.props.content for e in replay if isinstance(e, TextEvent)] == [str(i) for i in range(11, 40)]


async def test_logs_of_two_sessions_do_not_mix(store: Store) -> None:
    a, b = await _session(store, "a"), await _session(store, "b")
    ea = turn_events(SessionEmitter(a), "ta", "from a")
    eb = turn_events(SessionEmitter(b), "tb", "from b")
    await store.events.append(a, ea)
    await store.events.append(b, eb[:3])
    assert await store.events.after(a) == ea
    assert await store.events.after(b) == eb[:3]
    assert await store.events.last_seq(b) == 3


async def test_a_gap_is_refused_and_nothing_is_written(store: Store) -> None:
    sid = await _session(store)
    events = turn_events(SessionEmitter(sid), "t1", "hello")
    await store.events.append(sid, events[:2])
    with pytest.raises(EventSequenceError) as err:
        await store.events.append(sid, events[3:])  # seq 3 missing
    assert (err.value.expected, err.value.got) == (3, 4)
    assert "gap" in str(err.value) and sid in str(err.value)
    assert await store.events.last_seq(sid) == 2
    assert await store.events.after(sid) == events[:2]


async def test_a_gap_inside_one_batch_is_refused_as_a_whole(store: Store) -> None:
    sid = await _session(store)
    events = turn_events(SessionEmitter(sid), "t1", "hello")
    with pytest.raises(EventSequenceError) as err:
        await store.events.append(sid, [events[0], events[1], events[3]])
    assert (err.value.expected, err.value.got) == (3, 4)
    assert await store.events.after(sid) == []
    assert await store.events.last_seq(sid) == 0


async def test_a_duplicate_is_refused(store: Store) -> None:
    sid = await _session(store)
    events = turn_events(SessionEmitter(sid), "t1", "hello")
    await store.events.append(sid, events[:5])
    with pytest.raises(EventSequenceError) as err:
        await store.events.append(sid, events[3:7])
    assert (err.value.expected, err.value.got) == (6, 4)
    assert "duplicate" in str(err.value)
    assert await store.events.after(sid) == events[:5]


async def test_a_resumed_emitter_continues_the_stored_log(store: Store) -> None:
    sid = await _session(store)
    first = turn_events(SessionEmitter(sid), "t1", "one")
    await store.events.append(sid, first)
    resumed = SessionEmitter.resume(sid, await store.events.last_seq(sid), last_ts=first[-1].ts)
    second = turn_events(resumed, "t2", "two")
    await store.events.append(sid, second)
    assert [e.seq for e in await store.events.after(sid)] == list(range(1, len(first) + len(second) + 1))


async def test_racing_writers_with_the_same_seq_cannot_both_win(store: Store) -> None:
    sid = await _session(store)
    emitter_a, emitter_b = SessionEmitter(sid), SessionEmitter(sid)
    batch_a = turn_events(emitter_a, "ta", "writer a")
    batch_b = turn_events(emitter_b, "tb", "writer b")
    outcomes: list[str] = []

    async def write(batch: list[Event], name: str) -> None:
        try:
            await store.events.append(sid, batch)
            outcomes.append(name)
        except EventSequenceError:
            outcomes.append("refused")

    async with anyio.create_task_group() as tg:
        tg.start_soon(write, batch_a, "a")
        tg.start_soon(write, batch_b, "b")
    assert sorted(outcomes)[1] == "refused" and sorted(outcomes)[0] in {"a", "b"}
    winner = batch_a if "a" in outcomes else batch_b
    assert await store.events.after(sid) == winner


async def test_events_of_another_session_are_refused(store: Store) -> None:
    sid = await _session(store)
    other = turn_events(SessionEmitter("someone-else"), "t1", "hi")
    with pytest.raises(UsageError, match="someone-else"):
        await store.events.append(sid, other)
    assert await store.events.last_seq(sid) == 0


async def test_unknown_session_and_bad_arguments(store: Store) -> None:
    with pytest.raises(RecordNotFound):
        await store.events.append("nope", turn_events(SessionEmitter("nope"), "t", "x"))
    with pytest.raises(RecordNotFound):
        await store.events.last_seq("nope")
    sid = await _session(store)
    assert await store.events.append(sid, []) == 0
    with pytest.raises(UsageError):
        await store.events.after(sid, limit=0)
    with pytest.raises(UsageError):
        await store.events.after(sid, after_seq=-1)


async def test_deleting_the_session_deletes_its_log(store: Store) -> None:
    sid = await _session(store)
    await store.events.append(sid, turn_events(SessionEmitter(sid), "t1", "bye"))
    assert await store.sessions.delete(sid) is True
    assert await store.events.after(sid) == []
    await store.sessions.create("alice", "tests.echo", session_id=sid)
    assert await store.events.last_seq(sid) == 0


async def test_tail_is_the_last_seq_and_its_ts(store: Store) -> None:
    sid = await _session(store)
    assert await store.events.tail(sid) == (0, 0)
    emitter = SessionEmitter(sid, clock=iter(range(1000, 2000, 7)).__next__)
    events = turn_events(emitter, "t1", "hello")
    await store.events.append(sid, events)
    assert await store.events.tail(sid) == (events[-1].seq, events[-1].ts)
    with pytest.raises(RecordNotFound):
        await store.events.tail("no-such-session")
