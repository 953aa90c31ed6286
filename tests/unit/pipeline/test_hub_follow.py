"""A hub follows a session that another process writes (several replicas on one Postgres database).

Two `Store`s and two `SessionHub`s on one database stand for replicas A and B: A publishes a turn,
B's subscribers get every event live, in order, once, whether they subscribed before the turn,
in the middle of it with the last seq they had, or while B's listener hears nothing (the poll).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from sqlalchemy import text

from orchestrator.pipeline import hub as hub_module
from orchestrator.pipeline.handle import is_root_end
from orchestrator.pipeline.hub import SessionHub
from orchestrator.store import Store
from orchestrator.store import notify as notify_module
from orchestrator.store.notify import APPLICATION_NAME
from orchestrator.stream import Event, RandomIds, TurnBuilder
from tests.waiting import until

pytestmark = pytest.mark.databases("postgres")  # several replicas share a Postgres database
SESSION = "chat-hub-follow"
TURN = "turn-hub-follow"
WAIT_S = 30


@pytest.fixture
async def replica_b(store: Store) -> AsyncIterator[Store]:
    await store.sessions.create("alice", "hooks.echo", session_id=SESSION)
    other = Store.from_url(store.url)
    try:
        yield other
    finally:
        await other.aclose()


async def _publish_turn(hub: SessionHub, chunks: int, *, between: anyio.Event | None = None) -> list[Event]:
    builder = TurnBuilder(RandomIds())
    await hub.begin(SESSION)
    out = await hub.publish(SESSION, TURN, builder.stream_start("hooks.echo"))
    for n in range(chunks):
        out += await hub.publish(SESSION, TURN, builder.text(f"chunk {n} "))
        if between is not None and n == chunks // 2:
            await between.wait()
    out += await hub.publish(SESSION, TURN, builder.stream_end())
    return out


async def _collect(hub: SessionHub, after_seq: int, got: list[int]) -> None:
    """The session's events after `after_seq` up to the turn's end."""
    async for event in hub.subscribe(SESSION, after_seq=after_seq):
        got.append(event.seq)
        if is_root_end(event):
            return


async def _at_least(store: Store, seq: int) -> bool:
    return await store.events.last_seq(SESSION) >= seq


async def _wait_listening(store: Store) -> None:
    with anyio.fail_after(WAIT_S):
        await store.notices.connected.wait()


async def test_a_subscriber_on_b_follows_a_turn_published_on_a(store: Store, replica_b: Store) -> None:
    hub_a, hub_b = SessionHub(store), SessionHub(replica_b)
    got: list[int] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_collect, hub_b, 0, got)
        await until(lambda: hub_b.following() > 0, within=WAIT_S)
        await _wait_listening(replica_b)
        with anyio.fail_after(WAIT_S):
            published = await _publish_turn(hub_a, 40)
        await until(lambda: len(got) >= len(published), within=WAIT_S)
    assert got == [e.seq for e in published] == list(range(1, len(published) + 1))
    assert hub_b.following() == 0  # the subscriber left: nothing kept


async def test_a_client_resuming_on_b_mid_turn_gets_the_rest_without_gap_or_duplicate(
    store: Store, replica_b: Store
) -> None:
    hub_a, hub_b = SessionHub(store), SessionHub(replica_b)
    halfway = anyio.Event()
    chunks = 20
    got: list[int] = []
    async with anyio.create_task_group() as tg:

        async def turn() -> None:
            await _publish_turn(hub_a, chunks, between=halfway)

        tg.start_soon(turn)
        await until(lambda: _at_least(store, chunks // 2), within=WAIT_S)
        resume_from = await store.events.last_seq(SESSION) - 3  # the client had these, not the last 3
        done = anyio.Event()

        async def follow() -> None:
            await _collect(hub_b, resume_from, got)
            done.set()

        tg.start_soon(follow)
        await until(lambda: bool(got), within=WAIT_S)
        halfway.set()
        with anyio.fail_after(WAIT_S):
            await done.wait()
    assert got == list(range(resume_from + 1, await store.events.last_seq(SESSION) + 1))


async def test_without_notices_the_poll_still_delivers_in_order(
    store: Store, replica_b: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub_module, "POLL_S", 0.05)
    monkeypatch.setattr(replica_b.notices, "listen", lambda *args, **kwargs: None)  # a listener that is down
    hub_a, hub_b = SessionHub(store), SessionHub(replica_b)
    got: list[int] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_collect, hub_b, 0, got)
        await until(lambda: hub_b.following() > 0, within=WAIT_S)
        published = await _publish_turn(hub_a, 10)
        await until(lambda: len(got) >= len(published), within=WAIT_S)
    assert got == list(range(1, len(published) + 1))


async def test_the_owners_own_subscribers_are_not_fed_twice(store: Store, replica_b: Store) -> None:
    """A's notices for its own batches reach A's listener too; A's follower must not re-read them."""
    hub_a = SessionHub(store)
    got: list[int] = []
    reads = 0
    real_after = store.events.after

    async def counted(*args: object, **kwargs: object) -> list[Event]:
        nonlocal reads
        reads += 1
        return await real_after(*args, **kwargs)  # type: ignore[arg-type]

    async with anyio.create_task_group() as tg:
        tg.start_soon(_collect, hub_a, 0, got)
        await until(lambda: hub_a.following() > 0, within=WAIT_S)
        await _wait_listening(store)
        store.events.after = counted  # type: ignore[method-assign]
        published = await _publish_turn(hub_a, 10)
        await until(lambda: len(got) >= len(published), within=WAIT_S)
    assert got == list(range(1, len(published) + 1))
    assert reads == 0  # its own notices are skipped: the follower read nothing


async def _cut_listener(store: Store) -> int:
    """Terminate the listener connections of this database (what a server restart does to them)."""
    async with store._db.write() as tx:
        result = await tx.execute(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = :name AND datname = current_database()"
            ),
            {"name": APPLICATION_NAME},
        )
        return int(result.scalar_one())


async def test_a_lost_listener_reconnects_and_reads_what_it_missed(
    store: Store, replica_b: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub_module, "POLL_S", 3600.0)  # no poll: only the reconnect's re-read
    monkeypatch.setattr(notify_module, "RETRY_MIN_S", 1.0)  # B stays away while A writes
    hub_a, hub_b = SessionHub(store), SessionHub(replica_b)
    got: list[int] = []
    builder = TurnBuilder(RandomIds())
    async with anyio.create_task_group() as tg:
        tg.start_soon(_collect, hub_b, 0, got)
        await until(lambda: hub_b.following() > 0, within=WAIT_S)
        await _wait_listening(replica_b)
        await hub_a.begin(SESSION)
        first = await hub_a.publish(SESSION, TURN, builder.stream_start("hooks.echo"))
        await until(lambda: len(got) >= len(first), within=WAIT_S)
        assert await _cut_listener(store) == 1  # B's listener (A has none: it follows nothing)
        await until(lambda: not replica_b.notices.connected.is_set(), within=WAIT_S)
        missed = await hub_a.publish(SESSION, TURN, builder.text("while B was away"))  # no notice reaches B
        await _wait_listening(replica_b)  # reconnected
        rest = await hub_a.publish(SESSION, TURN, builder.stream_end())
        await until(lambda: len(got) >= len(first + missed + rest), within=WAIT_S)
    assert got == [e.seq for e in first + missed + rest] == list(range(1, len(got) + 1))
