"""The audit trail: entries come back newest first, filtered by actor, action, target and time."""

from __future__ import annotations

from orchestrator.store import Store
from tests.unit.store.conftest import FakeClock


async def test_record_and_filter(store: Store, clock: FakeClock) -> None:
    first = await store.audit.record("alice", "assistant.create", "team.coder", {"runner": "claude"})
    clock.advance(1)
    start = clock.now
    await store.audit.record("bob", "sandbox.kill", "cage-bob-x")
    clock.advance(1)
    last = await store.audit.record("alice", "key.revoke", "key_123", {"reason": "leaked"})

    assert first.id < last.id and first.detail == {"runner": "claude"} and first.ts < last.ts
    everything = await store.audit.list()
    assert [e.action for e in everything] == ["key.revoke", "sandbox.kill", "assistant.create"]
    assert everything[0] == last
    assert [e.target for e in await store.audit.list(actor="alice")] == ["key_123", "team.coder"]
    assert [e.actor for e in await store.audit.list(action="sandbox.kill")] == ["bob"]
    assert [e.id for e in await store.audit.list(target="team.coder")] == [first.id]
    assert [e.action for e in await store.audit.list(since=start)] == ["key.revoke", "sandbox.kill"]
    assert [e.action for e in await store.audit.list(limit=1)] == ["key.revoke"]
    assert await store.audit.list(actor="nobody") == []
