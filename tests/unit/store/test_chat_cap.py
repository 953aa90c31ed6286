"""The per-owner chat cap (`store.chats.bind(max_per_owner=...)`, `CAGE_MAX_CHATS_PER_OWNER`), on
SQLite and Postgres: refused past the cap, per owner, and never passed by concurrent creates,
even on two replicas (two `Store`s) sharing the database."""

from __future__ import annotations

import anyio
import pytest

from orchestrator.errors import CapacityError
from orchestrator.store import RecordExists, Store
from orchestrator.store.errors import OwnerChatsFull


async def test_an_owner_at_its_cap_gets_no_new_chat_and_another_owner_is_unaffected(store: Store) -> None:
    store.chats.bind(max_per_owner=3)
    first = await store.chats.create("alice", "tests.echo", client_id="one")
    second = await store.chats.create("alice", "tests.echo", client_id="two")
    await store.chats.create("alice", "tests.sub", parent_id=first.id)  # a child chat counts too
    with pytest.raises(OwnerChatsFull) as refused:
        await store.chats.create("alice", "tests.echo", client_id="four")
    assert isinstance(refused.value, CapacityError) and refused.value.code == "owner_chats_full"
    assert str(refused.value) == "chat limit reached for owner alice: at most 3"
    assert await store.chats.find("alice", "four") is None  # nothing was written
    assert len(await store.chats.list("alice")) == 3

    await store.chats.create("bob", "tests.echo", client_id="one")  # bob's own count
    with pytest.raises(RecordExists):  # an existing chat is that, not a full owner
        await store.chats.create("alice", "tests.echo", client_id="one")

    assert await store.chats.delete(second.id)
    await store.chats.create("alice", "tests.echo", client_id="four")  # room again
    assert len(await store.chats.list("alice")) == 3


async def test_an_unbound_store_has_no_cap(store: Store) -> None:
    for i in range(5):
        await store.chats.create("alice", "tests.echo", client_id=f"c{i}")
    store.chats.bind(max_per_owner=2)
    with pytest.raises(OwnerChatsFull):
        await store.chats.create("alice", "tests.echo", client_id="c5")
    store.chats.bind(max_per_owner=None)
    await store.chats.create("alice", "tests.echo", client_id="c5")
    assert len(await store.chats.list("alice")) == 6


async def test_concurrent_creates_on_two_replicas_never_pass_the_cap(store: Store, other: Store) -> None:
    for st in (store, other):
        st.chats.bind(max_per_owner=5)
    made: list[str] = []
    refused: list[str] = []

    async def create(st: Store, name: str) -> None:
        try:
            await st.chats.create("alice", "tests.echo", client_id=name)
            made.append(name)
        except OwnerChatsFull:
            refused.append(name)

    async with anyio.create_task_group() as tg:
        for i in range(16):
            tg.start_soon(create, store if i % 2 else other, f"c{i}")
    assert len(made) == 5 and len(refused) == 11
    assert sorted(c.client_id for c in await other.chats.list("alice")) == sorted(made)


async def test_concurrent_creates_of_one_id_at_the_cap_give_one_chat(store: Store, other: Store) -> None:
    for st in (store, other):
        st.chats.bind(max_per_owner=2)
    await store.chats.create("alice", "tests.echo", client_id="old")
    outcomes: list[str] = []

    async def create(st: Store) -> None:
        try:
            await st.chats.create("alice", "tests.echo", client_id="same")
            outcomes.append("made")
        except RecordExists:
            outcomes.append("exists")

    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(create, store if i % 2 else other)
    assert sorted(outcomes) == ["exists"] * 5 + ["made"]  # the losers are told it exists, not "full"
