"""Replica, turn and leader leases (`store.leases`), on SQLite and Postgres.

Two `Store`s on one database stand for two replicas (each store is one replica id); the fake clock
moves time past a lease instead of sleeping.
"""

from __future__ import annotations

import anyio
import pytest

from orchestrator.store import FinishedTurn, Store
from orchestrator.store.errors import OwnerTurnsRunning, TurnRunning
from orchestrator.store.leases import MAINTENANCE
from tests.unit.store.conftest import FakeClock

LEASE = 3.0


async def _session(store: Store) -> str:
    return (await store.sessions.create("alice", "tests.echo")).id


async def test_a_session_runs_one_turn_across_replicas(store: Store, other: Store) -> None:
    store.leases.bind(lease_seconds=LEASE)
    other.leases.bind(lease_seconds=LEASE)
    session = await _session(store)
    await store.turns.begin(session, "t1", "tests.echo", ())
    with pytest.raises(TurnRunning) as refused:
        await other.turns.begin(session, "t2", "tests.echo", ())
    assert refused.value.turn_id == "t1" and refused.value.replica_id == store.leases.replica_id
    assert "already running" in str(refused.value)
    lease = await other.leases.turn_of_session(session)
    assert lease is not None and lease.replica_id == store.leases.replica_id and lease.turn_id == "t1"

    await store.turns.persist(
        FinishedTurn(session_id=session, turn_id="t1", assistant_id="tests.echo", status="completed")
    )
    assert await other.leases.turn_of_session(session) is None
    await other.turns.begin(session, "t2", "tests.echo", ())
    lease = await store.leases.turn_of_session(session)
    assert lease is not None and lease.replica_id == other.leases.replica_id


async def test_concurrent_first_turns_of_one_session_make_one(store: Store, other: Store) -> None:
    session = await _session(store)
    won: list[str] = []
    refused: list[str] = []

    async def begin(st: Store, turn_id: str) -> None:
        try:
            await st.turns.begin(session, turn_id, "tests.echo", ())
            won.append(turn_id)
        except TurnRunning:
            refused.append(turn_id)

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(begin, store if i % 2 else other, f"t{i}")
    assert len(won) == 1 and len(refused) == 19
    assert [t.id for t in await store.turns.unfinished()] == won


async def test_a_dead_replicas_turns_are_orphaned_once_its_lease_runs_out(
    store: Store, other: Store, clock: FakeClock
) -> None:
    store.leases.bind(lease_seconds=LEASE)
    await store.leases.join("host-a", 1)
    session = await _session(store)
    await store.turns.begin(session, "t1", "tests.echo", ())
    clock.advance(LEASE - 1)
    assert await other.leases.orphaned(unheld=False) == set()
    assert await store.leases.heartbeat()  # renewed: alive for another lease
    clock.advance(LEASE - 1)
    assert await other.leases.orphaned(unheld=False) == set()
    assert [r.id for r in await other.leases.live_replicas()] == [store.leases.replica_id]

    clock.advance(LEASE)  # silent past its lease: dead
    assert await other.leases.orphaned(unheld=False) == {"t1"}
    assert await other.leases.live_replicas() == []
    assert await other.leases.forget_dead() == 1
    assert not await store.leases.heartbeat()  # its row is gone: the caller joins again


async def test_turns_no_heartbeat_keeps_are_left_to_start_up_recovery(store: Store, other: Store) -> None:
    session = await _session(store)  # `store` never bound: a `cage run` process
    await store.turns.begin(session, "t1", "tests.echo", ())
    lease = await other.leases.turn_of_session(session)
    assert lease is not None and lease.expires_at is None
    assert await other.leases.orphaned(unheld=False) == set()
    assert await other.leases.orphaned(unheld=True) == {"t1"}


async def test_close_unfinished_ends_the_lease(store: Store) -> None:
    session = await _session(store)
    await store.turns.begin(session, "t1", "tests.echo", ())
    assert await store.turns.close_unfinished(session, "t1", [])
    assert await store.leases.turn_of_session(session) is None
    await store.turns.begin(session, "t2", "tests.echo", ())


async def test_one_leader_until_its_lease_runs_out(store: Store, other: Store, clock: FakeClock) -> None:
    store.leases.bind(lease_seconds=LEASE)
    other.leases.bind(lease_seconds=LEASE)
    assert await store.leases.claim(MAINTENANCE)
    assert not await other.leases.claim(MAINTENANCE)
    clock.advance(LEASE - 1)
    assert await store.leases.claim(MAINTENANCE)  # renewed
    clock.advance(LEASE - 1)
    assert not await other.leases.claim(MAINTENANCE)
    assert await other.leases.leader(MAINTENANCE) == store.leases.replica_id

    clock.advance(LEASE)  # the leader went silent
    assert await other.leases.leader(MAINTENANCE) is None
    assert await other.leases.claim(MAINTENANCE)
    assert not await store.leases.claim(MAINTENANCE)
    await other.leases.leave()  # a clean shutdown hands the lead over at once
    assert await store.leases.claim(MAINTENANCE)


async def test_concurrent_claims_elect_one(store: Store, other: Store) -> None:
    winners: list[str] = []

    async def claim(st: Store) -> None:
        if await st.leases.claim(MAINTENANCE):
            winners.append(st.leases.replica_id)

    async with anyio.create_task_group() as tg:
        for st in (store, other, store, other):
            tg.start_soon(claim, st)
    leader = await store.leases.leader(MAINTENANCE)
    assert winners and set(winners) == {leader}


async def test_hold_excludes_the_other_replica_until_released(store: Store, other: Store) -> None:
    order: list[str] = []
    held = anyio.Event()

    async def first() -> None:
        async with store.leases.hold("sandbox:x"):
            order.append("first in")
            held.set()
            await anyio.sleep(0.3)
            order.append("first out")

    async def second() -> None:
        await held.wait()
        async with other.leases.hold("sandbox:x"):
            order.append("second in")
        async with other.leases.hold("sandbox:y"):  # another key: never waits for x
            order.append("other key")

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        tg.start_soon(second)
    if store.dialect == "postgresql":
        assert order == ["first in", "first out", "second in", "other key"]
    else:  # one process on SQLite: the manager's own locks do it; hold is a no-op
        assert order[0] == "first in" and sorted(order) == sorted(
            ["first in", "first out", "second in", "other key"]
        )


async def test_activity_sees_other_replicas_turns_by_session_and_owner(
    store: Store, other: Store, clock: FakeClock
) -> None:
    session = await _session(store)
    child = (await store.sessions.create("alice", "tests.sub", parent_id=session)).id
    quiet = (await store.sessions.create("bob", "tests.echo")).id
    clock.advance(5)
    await store.turns.begin(child, "t1", "tests.sub", ())  # a sub-agent turn under `session`
    seen = await other.leases.activity({"alice", "bob", "carol"}, {session, quiet})
    assert seen.busy_owners == {"alice"}
    assert session in seen.busy_sessions and quiet not in seen.busy_sessions
    assert seen.session_active[session] == clock.now  # its child session's turn began just now
    assert seen.owner_active["alice"] == clock.now
    assert seen.owner_active["bob"] < clock.now and "carol" not in seen.owner_active
    assert await other.leases.activity(set(), set()) == type(seen)()


async def test_an_owners_running_turns_are_capped_over_every_replica(store: Store, other: Store) -> None:
    for st in (store, other):
        st.leases.bind(lease_seconds=LEASE, max_turns_per_owner=3)
    sessions = [await _session(store) for _ in range(8)]
    bob = (await store.sessions.create("bob", "tests.echo")).id
    won: list[str] = []
    capped: list[str] = []

    async def begin(st: Store, session: str, turn_id: str) -> None:
        try:
            await st.turns.begin(session, turn_id, "tests.echo", ())
            won.append(session)
        except OwnerTurnsRunning as exc:
            assert "at most 3" in str(exc) and exc.code == "owner_turns_running"
            capped.append(session)

    async with anyio.create_task_group() as tg:
        for i, session in enumerate(sessions):
            tg.start_soon(begin, store if i % 2 else other, session, f"t{i}")
    assert len(won) == 3 and len(capped) == 5
    await other.turns.begin(bob, "t-bob", "tests.echo", ())  # another owner: its own count
    await store.turns.persist(
        FinishedTurn(
            session_id=won[0],
            turn_id=f"t{sessions.index(won[0])}",
            assistant_id="tests.echo",
            status="completed",
        )
    )
    await other.turns.begin(capped[0], "t-again", "tests.echo", ())  # one ended: room for one more
