"""Memory: four spaces, scopes that cannot see each other, TTL honoured on read, purge."""

from __future__ import annotations

from datetime import timedelta

import pytest

from orchestrator.errors import UsageError
from orchestrator.store import Store
from tests.unit.store.conftest import FakeClock


async def test_set_get_has_delete_in_one_scope(store: Store) -> None:
    alice = store.memory.scope("user", "alice")
    assert await alice.get("lang") is None
    assert await alice.get("lang", "en") == "en"
    entry = await alice.set("lang", {"primary": "fr", "also": ["en", "de"], "level": 3.5})
    assert entry.expires_at is None
    assert await alice.get("lang") == {"primary": "fr", "also": ["en", "de"], "level": 3.5}
    assert await alice.has("lang")
    await alice.set("lang", "it")
    assert await alice.get("lang") == "it"
    assert await alice.delete("lang") is True
    assert await alice.delete("lang") is False
    assert not await alice.has("lang")


async def test_user_a_cannot_read_user_b_and_spaces_are_separate(store: Store) -> None:
    await store.memory.set("user", "bob", "secret-plan", "bob's")
    await store.memory.set("team", "alice", "secret-plan", "team alice's")
    alice = store.memory.scope("user", "alice")
    assert await alice.get("secret-plan") is None
    assert not await alice.has("secret-plan")
    assert await alice.keys() == []
    assert await alice.delete("secret-plan") is False
    assert await alice.clear() == 0
    assert await store.memory.get("user", "bob", "secret-plan") == "bob's"
    assert await store.memory.get("team", "alice", "secret-plan") == "team alice's"
    assert await store.memory.scope("chat", "bob").get("secret-plan") is None


async def test_ttl_expires_on_read_and_purge_removes_only_expired(store: Store, clock: FakeClock) -> None:
    ctx = store.memory.scope("context", "req-1")
    short = await ctx.set("short", 1, ttl=10)
    await ctx.set("long", 2, ttl=timedelta(hours=1))
    await ctx.set("forever", 3)
    assert short.expires_at == clock.now + timedelta(seconds=10)

    clock.advance(9)
    assert await ctx.get("short") == 1
    clock.advance(1)  # exactly at expires_at: gone
    assert await ctx.get("short") is None
    assert not await ctx.has("short")
    assert await ctx.keys() == ["forever", "long"]
    assert await store.memory.entry("context", "req-1", "short") is None

    assert await store.memory.purge_expired() == 1
    clock.advance(3600)
    assert await store.memory.purge_expired() == 1
    assert await ctx.keys() == ["forever"]
    assert await store.memory.purge_expired() == 0


async def test_setting_again_refreshes_or_clears_the_ttl(store: Store, clock: FakeClock) -> None:
    session = store.memory.scope("chat", "c1")
    await session.set("k", "v1", ttl=5)
    clock.advance(4)
    await session.set("k", "v2")  # no ttl now: lives forever
    clock.advance(100)
    assert await session.get("k") == "v2"
    await session.set("k", "v3", ttl=1)
    clock.advance(2)
    assert await session.get("k") is None
    # an expired key can be set again
    await session.set("k", "v4")
    assert await session.get("k") == "v4"


async def test_keys_with_prefix_and_clear(store: Store) -> None:
    team = store.memory.scope("team", "t1")
    for key in ("todo:1", "todo:2", "note_a", "todo%x"):
        await team.set(key, key)
    assert await team.keys(prefix="todo") == ["todo%x", "todo:1", "todo:2"]
    assert await team.keys(prefix="todo:") == ["todo:1", "todo:2"]
    assert await team.clear() == 4
    assert await team.keys() == []


async def test_bad_spaces_scopes_keys_and_ttls_are_refused(store: Store) -> None:
    with pytest.raises(UsageError, match="unknown memory space"):
        store.memory.scope("global", "x")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="scope id"):
        store.memory.scope("user", "")
    with pytest.raises(UsageError):
        await store.memory.set("user", "a", "", 1)
    with pytest.raises(UsageError, match="ttl"):
        await store.memory.set("user", "a", "k", 1, ttl=0)
    assert await store.memory.keys("user", "a") == []
