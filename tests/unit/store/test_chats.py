"""Chats: create, read, list per owner, update, delete with everything hanging off them."""

from __future__ import annotations

import pytest

from orchestrator.store import NewMessage, RecordExists, RecordNotFound, Store
from tests.unit.store.conftest import FakeClock


async def test_create_then_get_returns_the_same_record(store: Store, clock: FakeClock) -> None:
    chat = await store.chats.create(
        "alice", "tests.echo", title="first", metadata={"workspace": "w1", "tags": ["a", "b"]}
    )
    assert len(chat.id) == 32 and chat.owner == "alice" and chat.last_seq == 0
    assert chat.created_at == chat.updated_at == clock.now
    assert chat.metadata == {"workspace": "w1", "tags": ["a", "b"]}
    assert await store.chats.get(chat.id) == chat
    assert await store.chats.get("missing") is None
    with pytest.raises(RecordNotFound):
        await store.chats.require("missing")


async def test_a_taken_id_is_refused(store: Store) -> None:
    await store.chats.create("alice", "tests.echo", chat_id="same")
    with pytest.raises(RecordExists):
        await store.chats.create("bob", "tests.other", chat_id="same")
    assert (await store.chats.require("same")).owner == "alice"


async def test_list_is_per_owner_and_most_recent_first(store: Store, clock: FakeClock) -> None:
    for i in range(3):
        await store.chats.create("alice", "tests.echo" if i < 2 else "tests.other", chat_id=f"a{i}")
        clock.advance(1)
    await store.chats.create("bob", "tests.echo", chat_id="b0")
    assert [c.id for c in await store.chats.list("alice")] == ["a2", "a1", "a0"]
    assert [c.id for c in await store.chats.list("alice", assistant_id="tests.echo")] == ["a1", "a0"]
    assert [c.id for c in await store.chats.list("alice", limit=1)] == ["a2"]
    clock.advance(1)
    await store.chats.update("a0", title="bumped")
    assert [c.id for c in await store.chats.list("alice")] == ["a0", "a2", "a1"]
    assert [c.id for c in await store.chats.list("bob")] == ["b0"]


async def test_update_changes_title_and_merges_metadata(store: Store, clock: FakeClock) -> None:
    chat = await store.chats.create("alice", "tests.echo", metadata={"keep": 1, "drop": 2})
    clock.advance(30)
    updated = await store.chats.update(chat.id, title="renamed", metadata={"drop": None, "new": "x"})
    assert updated.title == "renamed"
    assert updated.metadata == {"keep": 1, "new": "x"}
    assert updated.updated_at == clock.now and updated.created_at == chat.created_at
    assert await store.chats.get(chat.id) == updated
    with pytest.raises(RecordNotFound):
        await store.chats.update("missing", title="x")


async def test_delete_removes_messages_and_turns_too(store: Store) -> None:
    chat = await store.chats.create("alice", "tests.echo")
    await store.messages.add(chat.id, "t1", [NewMessage(id="m1", role="user", content="hi")])
    assert await store.chats.delete(chat.id) is True
    assert await store.chats.delete(chat.id) is False
    assert await store.messages.of_turn("t1") == []
    with pytest.raises(RecordNotFound):
        await store.chats.set_resume(chat.id, "claude", {"x": 1})
