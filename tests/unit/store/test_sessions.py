"""Sessions: create, read, list per owner, update, delete with everything hanging off them."""

from __future__ import annotations

import pytest

from orchestrator.store import NewMessage, RecordExists, RecordNotFound, Store
from tests.unit.store.conftest import FakeClock


async def test_create_then_get_returns_the_same_record(store: Store, clock: FakeClock) -> None:
    session = await store.sessions.create(
        "alice", "tests.echo", title="first", metadata={"workspace": "w1", "tags": ["a", "b"]}
    )
    assert len(session.id) == 32 and session.owner == "alice" and session.last_seq == 0
    assert session.created_at == session.updated_at == clock.now
    assert session.metadata == {"workspace": "w1", "tags": ["a", "b"]}
    assert await store.sessions.get(session.id) == session
    assert await store.sessions.get("missing") is None
    with pytest.raises(RecordNotFound):
        await store.sessions.require("missing")


async def test_a_taken_id_is_refused(store: Store) -> None:
    await store.sessions.create("alice", "tests.echo", session_id="same")
    with pytest.raises(RecordExists):
        await store.sessions.create("bob", "tests.other", session_id="same")
    assert (await store.sessions.require("same")).owner == "alice"


async def test_list_is_per_owner_and_most_recent_first(store: Store, clock: FakeClock) -> None:
    for i in range(3):
        await store.sessions.create("alice", "tests.echo" if i < 2 else "tests.other", session_id=f"a{i}")
        clock.advance(1)
    await store.sessions.create("bob", "tests.echo", session_id="b0")
    assert [c.id for c in await store.sessions.list("alice")] == ["a2", "a1", "a0"]
    assert [c.id for c in await store.sessions.list("alice", assistant_id="tests.echo")] == ["a1", "a0"]
    assert [c.id for c in await store.sessions.list("alice", limit=1)] == ["a2"]
    clock.advance(1)
    await store.sessions.update("a0", title="bumped")
    assert [c.id for c in await store.sessions.list("alice")] == ["a0", "a2", "a1"]
    assert [c.id for c in await store.sessions.list("bob")] == ["b0"]


async def test_update_changes_title_and_merges_metadata(store: Store, clock: FakeClock) -> None:
    session = await store.sessions.create("alice", "tests.echo", metadata={"keep": 1, "drop": 2})
    clock.advance(30)
    updated = await store.sessions.update(session.id, title="renamed", metadata={"drop": None, "new": "x"})
    assert updated.title == "renamed"
    assert updated.metadata == {"keep": 1, "new": "x"}
    assert updated.updated_at == clock.now and updated.created_at == session.created_at
    assert await store.sessions.get(session.id) == updated
    with pytest.raises(RecordNotFound):
        await store.sessions.update("missing", title="x")


async def test_delete_removes_messages_and_turns_too(store: Store) -> None:
    session = await store.sessions.create("alice", "tests.echo")
    await store.messages.add(session.id, "t1", [NewMessage(id="m1", role="user", content="hi")])
    assert await store.sessions.delete(session.id) is True
    assert await store.sessions.delete(session.id) is False
    assert await store.messages.of_turn("t1") == []
    with pytest.raises(RecordNotFound):
        await store.sessions.set_resume(session.id, "claude", {"x": 1})
