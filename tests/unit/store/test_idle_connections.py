"""Postgres pooled connections: one idle long enough is pinged before use, and a dead one (its
server process gone, as after a restart) is replaced instead of failing the query."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from orchestrator.store import Store, database


async def test_a_dead_idle_connection_is_replaced_before_use(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    if store.url.get_backend_name() != "postgresql":
        pytest.skip("Postgres only: SQLite has no server to lose")
    session = await store.sessions.create("alice", "tests.echo")
    async with store._db.engine.connect() as conn:  # the pool's connection, to be killed
        pid = await conn.scalar(text("SELECT pg_backend_pid()"))
    admin = Store.from_url(store.url)
    try:
        async with admin._db.engine.connect() as conn:
            assert await conn.scalar(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
    finally:
        await admin.aclose()
    monkeypatch.setattr(database, "_PING_AFTER_S", 0.0)  # it has been idle "long enough"
    got = await store.sessions.get(session.id)
    assert got is not None and got.id == session.id
