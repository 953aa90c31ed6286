"""The per-owner session cap (`store.sessions.bind(max_per_owner=...)`, `CAGE_MAX_SESSIONS_PER_OWNER`), on
SQLite and Postgres: refused past the cap, per owner, and never passed by concurrent creates,
even on two replicas (two `Store`s) sharing the database."""

from __future__ import annotations

import anyio
import pytest

from orchestrator.errors import CapacityError
from orchestrator.store import RecordExists, Store
from orchestrator.store.errors import OwnerSessionsFull


async def test_an_owner_at_its_cap_gets_no_new_session_and_another_owner_is_unaffected(store: Store) -> None:
    store.sessions.bind(max_per_owner=3)
    first = await store.sessions.create("alice", "tests.echo", client_id="one")
    second = await store.sessions.create("alice", "tests.echo", client_id="two")
    await store.sessions.create("alice", "tests.sub", parent_id=first.id)  # a child session counts too
    with pytest.raises(OwnerSessionsFull) as refused:
        await store.sessions.create("alice", "tests.echo", client_id="four")
    assert isinstance(refused.value, CapacityError) and refused.value.code == "owner_sessions_full"
    assert str(refused.value) == "session limit reached for owner alice: at most 3"
    assert await store.sessions.find("alice", "four") is None  # nothing was written
    assert len(await store.sessions.list("alice")) == 3

    await store.sessions.create("bob", "tests.echo", client_id="one")  # bob's own count
    with pytest.raises(RecordExists):  # an existing session is that, not a full owner
        await store.sessions.create("alice", "tests.echo", client_id="one")

    assert await store.sessions.delete(second.id)
    await store.sessions.create("alice", "tests.echo", client_id="four")  # room again
    assert len(await store.sessions.list("alice")) == 3


async def test_an_unbound_store_has_no_cap(store: Store) -> None:
    for i in range(5):
        await store.sessions.create("alice", "tests.echo", client_id=f"c{i}")
    store.sessions.bind(max_per_owner=2)
    with pytest.raises(OwnerSessionsFull):
        await store.sessions.create("alice", "tests.echo", client_id="c5")
    store.sessions.bind(max_per_owner=None)
    await store.sessions.create("alice", "tests.echo", client_id="c5")
    assert len(await store.sessions.list("alice")) == 6


async def test_concurrent_creates_on_two_replicas_never_pass_the_cap(store: Store, other: Store) -> None:
    for st in (store, other):
        st.sessions.bind(max_per_owner=5)
    made: list[str] = []
    refused: list[str] = []

    async def create(st: Store, name: str) -> None:
        try:
            await st.sessions.create("alice", "tests.echo", client_id=name)
            made.append(name)
        except OwnerSessionsFull:
            refused.append(name)

    async with anyio.create_task_group() as tg:
        for i in range(16):
            tg.start_soon(create, store if i % 2 else other, f"c{i}")
    assert len(made) == 5 and len(refused) == 11
    assert sorted(c.client_id for c in await other.sessions.list("alice")) == sorted(made)


async def test_concurrent_creates_of_one_id_at_the_cap_give_one_session(store: Store, other: Store) -> None:
    for st in (store, other):
        st.sessions.bind(max_per_owner=2)
    await store.sessions.create("alice", "tests.echo", client_id="old")
    outcomes: list[str] = []

    async def create(st: Store) -> None:
        try:
            await st.sessions.create("alice", "tests.echo", client_id="same")
            outcomes.append("made")
        except RecordExists:
            outcomes.append("exists")

    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(create, store if i % 2 else other)
    assert sorted(outcomes) == ["exists"] * 5 + ["made"]  # the losers are told it exists, not "full"
