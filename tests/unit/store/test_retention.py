"""M9: retention deletes what is past its time-to-live, and memory is bounded."""

from __future__ import annotations

from datetime import timedelta

import pytest

from orchestrator.errors import CapacityError, UsageError
from orchestrator.store import Store
from orchestrator.store.memory import MAX_VALUE_BYTES
from orchestrator.store.retention import RetentionPolicy
from orchestrator.stream import LifecycleEvent, SessionEmitter, StreamStart
from tests.unit.store.conftest import FakeClock


async def _log(store: Store, session_id: str, clock: FakeClock) -> None:
    emitter = SessionEmitter.resume(
        session_id, await store.events.last_seq(session_id), clock=lambda: int(clock().timestamp() * 1000)
    )
    await store.events.append(
        session_id, emitter.stamp_all([LifecycleEvent(props=StreamStart(assistant_id="a"))], turn_id="t")
    )


async def test_sweep_removes_idle_sessions_old_events_and_audit(store: Store, clock: FakeClock) -> None:
    old = await store.sessions.create("alice", "a", session_id="old")
    await store.audit.record("k", "session.delete", "x")
    await _log(store, "old", clock)
    running = await store.sessions.create("alice", "a", session_id="running")
    await store.turns.begin("running", "turn-r", "a", ())
    clock.advance(8 * 86400)
    fresh = await store.sessions.create("alice", "a", session_id="fresh")
    await _log(store, "fresh", clock)
    await store.audit.record("k", "session.delete", "y")

    nothing = await store.retention.sweep(RetentionPolicy())
    assert (nothing.sessions, nothing.events, nothing.audit) == (0, 0, 0)

    week = timedelta(days=7)
    swept = await store.retention.sweep(RetentionPolicy(session_ttl=week, event_ttl=week, audit_ttl=week))
    assert (swept.sessions, swept.audit) == (1, 1)
    assert await store.sessions.get(old.id) is None  # with its log
    assert await store.sessions.get(running.id) is not None  # a running turn keeps its session
    assert await store.sessions.get(fresh.id) is not None and len(await store.events.after("fresh")) == 1
    assert [a.target for a in await store.audit.list()] == ["y"]


async def test_memory_values_and_keys_are_bounded(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match=f"the limit is {MAX_VALUE_BYTES} bytes"):
        await store.memory.set("user", "alice", "big", "x" * MAX_VALUE_BYTES)
    monkeypatch.setattr("orchestrator.store.memory.MAX_KEYS_PER_SCOPE", 3)
    for key in ("a", "b", "c"):
        await store.memory.set("user", "alice", key, 1)
    await store.memory.set("user", "alice", "a", 2)  # overwriting takes no room
    with pytest.raises(CapacityError, match="user memory is full: at most 3 keys"):
        await store.memory.set("user", "alice", "d", 1)
    await store.memory.set("user", "bob", "d", 1)  # another scope has its own room
    assert await store.memory.keys("user", "alice") == ["a", "b", "c"]


async def test_sweep_deletes_in_batches(
    store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("orchestrator.store.retention.BATCH", 2)
    for n in range(5):
        await store.sessions.create("alice", "a", session_id=f"c{n}")
        await _log(store, f"c{n}", clock)
        await store.audit.record("k", "session.delete", f"t{n}")
    clock.advance(86400)
    await store.sessions.create("alice", "a", session_id="keep")
    day = timedelta(hours=1)
    only_events = await store.retention.sweep(RetentionPolicy(event_ttl=day, audit_ttl=day))
    assert (only_events.events, only_events.audit) == (5, 5)
    swept = await store.retention.sweep(RetentionPolicy(session_ttl=day))
    assert swept.sessions == 5 and [c.id for c in await store.sessions.list("alice")] == ["keep"]
