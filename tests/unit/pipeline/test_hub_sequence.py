"""The durable log and the live stream agree: every seq a subscriber gets is in the log, once.

A cancel during a tool run used to leave the log shorter than what live clients had got: the
session's emitter had been evicted (a subscriber left), two producers of the turn (the cancelled
tool's closing events and the turn's end) both reloaded it, and the second, whose `last_seq` read
came before the first's write, rewound the emitter; its batch reused a seq already in the log, was
refused (`duplicate: expected seq N+1, got N`) and went out live only. These tests hold the two
producers in exactly that window on a real store.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from orchestrator.pipeline.handle import is_root_end
from orchestrator.pipeline.hub import SessionHub
from orchestrator.store import Store, StoreError
from orchestrator.store.events import Committed
from orchestrator.stream import Event, RandomIds, TurnBuilder, validate_stream
from tests.pipeline_rig import Rig

SESSION = "chat-hub-seq"
TURN = "turn-hub-seq"


def batch(builder: TurnBuilder, text: str) -> list[Event]:
    return builder.text(text)


async def logged(store: Store) -> list[int]:
    return [e.seq for e in await store.events.after(SESSION, 0)]


@pytest.fixture
async def hub(store: Store) -> SessionHub:
    await store.sessions.create("alice", "hooks.echo", session_id=SESSION)
    hub = SessionHub(store)
    await hub.begin(SESSION)
    builder = TurnBuilder(RandomIds())
    await hub.publish(SESSION, TURN, builder.stream_start("hooks.echo"))
    return hub


async def test_two_producers_reloading_an_evicted_emitter_continue_the_log(
    hub: SessionHub, store: Store
) -> None:
    before = await store.events.last_seq(SESSION)
    assert hub.evict(SESSION)  # a subscriber left between two batches: the next batch reloads
    builder = TurnBuilder(RandomIds())
    first, second = batch(builder, "tool output"), batch(builder, "cancelled")
    in_commit = anyio.Event()
    gate = anyio.Event()

    async def held(stamped: list[Event]) -> None:
        in_commit.set()
        await gate.wait()
        await store.events.append(SESSION, stamped)

    published: list[list[Event]] = []
    live: list[int] = []

    async def produce(events: Sequence[Event]) -> None:
        published.append(await hub.publish(SESSION, TURN, events, commit=held))

    async def watch() -> None:
        async for event in hub.subscribe(SESSION, after_seq=before):
            live.append(event.seq)
            if len(live) == len(first) + len(second):
                return

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        tg.start_soon(produce, first)
        tg.start_soon(produce, second)
        with anyio.fail_after(5):
            await in_commit.wait()  # one producer holds the session's lock, its write not landed yet
            # the other producer waits for the lock (a lock offers no event for that: poll)
            while hub._sessions[SESSION].lock.statistics().tasks_waiting != 1:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        gate.set()

    seqs = [e.seq for events in published for e in events]
    expected = list(range(before + 1, before + 1 + len(first) + len(second)))
    assert sorted(seqs) == expected
    assert await logged(store) == list(range(1, expected[-1] + 1))
    assert live == expected  # what the live client got is exactly the log's tail


async def test_a_write_that_landed_but_reported_failure_is_not_stamped_again(
    hub: SessionHub, store: Store
) -> None:
    builder = TurnBuilder(RandomIds())

    async def lost_reply(stamped: list[Event]) -> None:
        await store.events.append(SESSION, stamped)  # committed, then the caller never heard back
        raise StoreError("connection lost after commit")

    with pytest.raises(StoreError):
        await hub.publish(SESSION, TURN, batch(builder, "landed"), commit=lost_reply)
    landed = await store.events.last_seq(SESSION)
    after = await hub.publish(SESSION, TURN, batch(builder, "next"))
    assert after[0].seq == landed + 1
    assert await logged(store) == list(range(1, after[-1].seq + 1))


async def test_a_cancelled_write_leaves_the_emitter_continuing_the_log(hub: SessionHub, store: Store) -> None:
    builder = TurnBuilder(RandomIds())
    in_commit = anyio.Event()

    async def slow(stamped: list[Event]) -> None:
        await store.events.append(SESSION, stamped)
        in_commit.set()
        await anyio.sleep_forever()  # the cancel arrives after the write landed

    async with anyio.create_task_group() as tg:

        async def run() -> None:
            await hub.publish(SESSION, TURN, batch(builder, "landed then cancelled"), commit=slow)

        tg.start_soon(run)
        with anyio.fail_after(5):
            await in_commit.wait()
        tg.cancel_scope.cancel()
    landed = await store.events.last_seq(SESSION)
    after = await hub.publish(SESSION, TURN, batch(builder, "after the cancel"))
    assert after[0].seq == landed + 1
    assert await logged(store) == list(range(1, after[-1].seq + 1))


async def test_a_turn_cancelled_while_its_events_are_written_logs_what_clients_got(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service end to end: the cancel lands while a tool's output is being written (the write
    commits, the await is cancelled); the turn's closing events and its row are still persisted and
    the log holds exactly what a live client received."""
    events = rig.store.events
    append = events.append
    landed = anyio.Event()

    async def append_then_hang(
        session_id: str, batch: Sequence[Event], *, committed: Committed | None = None
    ) -> int:
        last = await append(session_id, batch, committed=committed)
        if not landed.is_set() and any(e.type == "text" for e in batch):
            landed.set()
            await anyio.sleep_forever()  # the write is in; the cancel finds the publish still waiting
        return last

    monkeypatch.setattr(events, "append", append_then_hang)
    turn = rig.turn("hooks.slow", "x", session_id="chat-cancel-mid-write")
    live: list[Event] = []

    async def watch() -> None:
        async for event in rig.service.subscribe(turn.session_id):
            live.append(event)
            if is_root_end(event):
                return

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            handle = await rig.service.start(turn)
            tg.start_soon(watch)
            await landed.wait()
            await handle.interrupt()
            result = await handle.result()

    assert result.status == "cancelled"
    log = await rig.store.events.after(turn.session_id)
    assert [(e.seq, e.type) for e in live] == [(e.seq, e.type) for e in log]
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    assert validate_stream(log) == []
    record = await rig.store.turns.get(turn.turn_id)
    assert record is not None and record.status == "cancelled"  # persisted with its closing events
