"""Pooled connections: on Postgres one idle long enough is pinged before use, a dead one (its
server process gone, as after a restart) is replaced instead of failing the query, and the ones a
peak opened are kept."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest
from sqlalchemy import text
from sqlalchemy.pool import QueuePool

from orchestrator.store import Store, database
from orchestrator.stream import SessionEmitter
from tests.unit.store.factory import turn_events


@pytest.mark.databases("postgres")  # SQLite has no server to lose
async def test_a_dead_idle_connection_is_replaced_before_use(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
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


async def test_a_postgres_store_keeps_the_connections_a_peak_opened(store: Store) -> None:
    """Postgres: a connection opened at a peak stays for the next one (a login, the driver's type
    introspection and every statement's PREPARE are paid once), and there are never more than 26.
    SQLite keeps 16 and closes the peak's other 10 after use."""
    postgres = store.url.get_backend_name() == "postgresql"
    engine = store._db.engine
    peak = [await engine.connect() for _ in range(26)]
    for conn in peak:
        assert await conn.scalar(text("SELECT 1")) == 1
    if postgres:
        with pytest.raises(TimeoutError):  # a 27th waits for one of them
            async with asyncio.timeout(0.5):
                await engine.connect()
    for conn in peak:
        await conn.close()
    assert cast("QueuePool", engine.pool).checkedin() == (26 if postgres else 16)


async def test_a_read_cancelled_mid_query_leaves_a_usable_pool(store: Store) -> None:
    """`Database.query` closes its connection in place, also when the read is cancelled: the pool
    gets it back (or a fresh one in its place) and every read after works."""
    postgres = store.url.get_backend_name() == "postgresql"
    session = await store.sessions.create("alice", "tests.echo")
    slow = text("SELECT pg_sleep(5)" if postgres else "SELECT 1")

    async def read() -> None:
        async with store._db.query() as conn:
            await conn.execute(slow)
            await asyncio.sleep(5)  # SQLite's read waits for nothing: cancelled here instead

    for _ in range(3):
        task = asyncio.ensure_future(read())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert cast("QueuePool", store._db.engine.pool).checkedout() == 0
    for _ in range(30):
        assert await store.events.tail(session.id) == (0, 0)


_GROUP_COMMIT_PREPARED = text(
    "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%WITH wanted' || ' AS%'"
)  # the pattern split, so that this query, prepared too, is not one it counts


@pytest.mark.databases("postgres")  # SQLite prepares in microseconds, in-process
async def test_a_pooled_postgres_connection_comes_with_the_group_commit_prepared(store: Store) -> None:
    """The event log's group commit statement is prepared when a connection is checked out, not by
    the first batch written on it (which every event queued behind it waited for), and once."""
    engine = store._db.engine
    peak = [await engine.connect() for _ in range(3)]  # new connections, opened after the migrations
    try:
        for conn in peak:
            assert await conn.scalar(_GROUP_COMMIT_PREPARED) == 1
    finally:
        for conn in peak:
            await conn.close()
    session = await store.sessions.create("alice", "tests.echo")
    await store.events.append(session.id, turn_events(SessionEmitter(session.id), "t1", "hello"))
    async with engine.connect() as conn:
        assert await conn.scalar(_GROUP_COMMIT_PREPARED) == 1
