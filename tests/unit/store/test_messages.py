"""Session history: ordered, bounded, per session; duplicate ids refused."""

from __future__ import annotations

import pytest

from orchestrator.errors import UsageError
from orchestrator.store import NewMessage, RecordExists, RecordNotFound, Store


async def test_history_returns_the_last_messages_oldest_first(store: Store) -> None:
    session = await store.sessions.create("alice", "tests.echo")
    other = await store.sessions.create("bob", "tests.echo")
    for i in range(1, 8):
        role = "user" if i % 2 else "assistant"
        await store.messages.add(session.id, f"t{i}", [NewMessage(id=f"m{i}", role=role, content=f"#{i}")])
    await store.messages.add(other.id, "tx", [NewMessage(id="x1", role="user", content="bob's")])

    last3 = await store.messages.history(session.id, limit=3)
    assert [m.content for m in last3] == ["#5", "#6", "#7"]
    assert [m.sequence for m in last3] == [5, 6, 7]
    assert [m.role for m in last3] == ["user", "assistant", "user"]
    assert {m.session_id for m in await store.messages.history(session.id, limit=100)} == {session.id}
    assert [m.content for m in await store.messages.history(other.id)] == ["bob's"]
    assert [m.id for m in await store.messages.of_turn("t4")] == ["m4"]


async def test_structured_content_round_trips(store: Store) -> None:
    session = await store.sessions.create("alice", "tests.echo")
    content = [
        {"type": "text", "text": 'é ✓ 中文 "quoted"'},
        {"type": "image", "url": "x", "n": [1, 2.5, None]},
    ]
    [saved] = await store.messages.add(session.id, "t", [NewMessage(id="m", role="user", content=content)])
    assert saved.content == content
    assert (await store.messages.history(session.id))[0] == saved


async def test_duplicate_ids_unknown_sessions_and_bad_limits_are_refused(store: Store) -> None:
    session = await store.sessions.create("alice", "tests.echo")
    await store.messages.add(session.id, "t", [NewMessage(id="m", role="user", content="a")])
    with pytest.raises(RecordExists):
        await store.messages.add(session.id, "t", [NewMessage(id="m", role="user", content="b")])
    assert [m.content for m in await store.messages.history(session.id)] == ["a"]
    with pytest.raises(RecordNotFound):
        await store.messages.add("ghost", "t", [NewMessage(id="g", role="user", content="a")])
    with pytest.raises(UsageError):
        await store.messages.history(session.id, limit=0)
