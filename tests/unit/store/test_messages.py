"""Chat history: ordered, bounded, per chat; duplicate ids refused."""

from __future__ import annotations

import pytest

from orchestrator.errors import UsageError
from orchestrator.store import NewMessage, RecordExists, RecordNotFound, Store


async def test_history_returns_the_last_messages_oldest_first(store: Store) -> None:
    chat = await store.chats.create("alice", "tests.echo")
    other = await store.chats.create("bob", "tests.echo")
    for i in range(1, 8):
        role = "user" if i % 2 else "assistant"
        await store.messages.add(chat.id, f"t{i}", [NewMessage(id=f"m{i}", role=role, content=f"#{i}")])
    await store.messages.add(other.id, "tx", [NewMessage(id="x1", role="user", content="bob's")])

    last3 = await store.messages.history(chat.id, limit=3)
    assert [m.content for m in last3] == ["#5", "#6", "#7"]
    assert [m.sequence for m in last3] == [5, 6, 7]
    assert [m.role for m in last3] == ["user", "assistant", "user"]
    assert {m.chat_id for m in await store.messages.history(chat.id, limit=100)} == {chat.id}
    assert [m.content for m in await store.messages.history(other.id)] == ["bob's"]
    assert [m.id for m in await store.messages.of_turn("t4")] == ["m4"]


async def test_structured_content_round_trips(store: Store) -> None:
    chat = await store.chats.create("alice", "tests.echo")
    content = [
        {"type": "text", "text": 'é ✓ 中文 "quoted"'},
        {"type": "image", "url": "x", "n": [1, 2.5, None]},
    ]
    [saved] = await store.messages.add(chat.id, "t", [NewMessage(id="m", role="user", content=content)])
    assert saved.content == content
    assert (await store.messages.history(chat.id))[0] == saved


async def test_duplicate_ids_unknown_chats_and_bad_limits_are_refused(store: Store) -> None:
    chat = await store.chats.create("alice", "tests.echo")
    await store.messages.add(chat.id, "t", [NewMessage(id="m", role="user", content="a")])
    with pytest.raises(RecordExists):
        await store.messages.add(chat.id, "t", [NewMessage(id="m", role="user", content="b")])
    assert [m.content for m in await store.messages.history(chat.id)] == ["a"]
    with pytest.raises(RecordNotFound):
        await store.messages.add("ghost", "t", [NewMessage(id="g", role="user", content="a")])
    with pytest.raises(UsageError):
        await store.messages.history(chat.id, limit=0)
