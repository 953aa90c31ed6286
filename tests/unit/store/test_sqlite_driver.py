"""The SQLite driver (`orchestrator.store.sqlite_driver`) on a real database file: reads and a
write's statements run on the loop's thread, a write waits for another process's lock on the
worker thread (the loop goes on meanwhile), and every way a transaction ends leaves the pooled
connection clean for the next one."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from orchestrator.store import Store
from orchestrator.store.database import sqlite_path
from orchestrator.store.sqlite_driver import OneHopConnection, connect
from orchestrator.store.tables import SessionRow


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    store = Store.from_url(f"sqlite+aiosqlite:///{tmp_path / 'cage.db'}")
    await store.migrate()
    yield store
    await store.aclose()


async def test_a_write_waits_for_another_process_lock_while_the_loop_goes_on(sqlite_store: Store) -> None:
    session = await sqlite_store.sessions.create("alice", "tests.echo")
    path = sqlite_path(sqlite_store.url)
    assert path is not None
    locked, release = threading.Event(), threading.Event()

    def other_process() -> None:  # another process's writer: holds the lock until told
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        locked.set()
        release.wait(30)
        db.execute("COMMIT")
        db.close()

    holder = threading.Thread(target=other_process)
    holder.start()
    try:
        await asyncio.to_thread(locked.wait, 30)
        write = asyncio.create_task(sqlite_store.sessions.update(session.id, title="waited"))
        ticks = 0
        while ticks < 20:  # the loop runs while the write waits: it is not waiting on the loop
            await asyncio.sleep(0.01)
            ticks += 1
        assert not write.done()  # still waiting for the other process's lock
        release.set()
        await asyncio.wait_for(write, 30)
    finally:
        release.set()
        await asyncio.to_thread(holder.join)
    got = await sqlite_store.sessions.get(session.id)
    assert got is not None and got.title == "waited"


async def test_a_write_in_a_read_transaction_commits(sqlite_store: Store) -> None:
    session = await sqlite_store.sessions.create("alice", "tests.echo")
    async with sqlite_store._db.read() as tx:
        before = await tx.scalar(select(SessionRow.title).where(SessionRow.id == session.id))
        await tx.execute(
            update(SessionRow.__table__).where(SessionRow.id == session.id).values(title="in a read")
        )
    assert before == ""
    got = await sqlite_store.sessions.get(session.id)
    assert got is not None and got.title == "in a read"


async def test_a_failed_write_rolls_back_and_the_connection_serves_the_next(sqlite_store: Store) -> None:
    session = await sqlite_store.sessions.create("alice", "tests.echo")
    row = {
        "id": session.id,  # taken: the insert fails after the update went in
        "owner": "bob",
        "client_id": "x",
        "assistant_id": "tests.echo",
        "title": "",
        "created_at": session.created_at,
        "updated_at": session.updated_at,
        "last_seq": 0,
        "metadata": {},
        "resume": {},
    }
    for _ in range(3):  # the pool hands the same connections out again
        with pytest.raises(IntegrityError):
            async with sqlite_store._db.write() as tx:
                await tx.execute(
                    update(SessionRow.__table__).where(SessionRow.id == session.id).values(title="lost")
                )
                await tx.execute(insert(SessionRow.__table__).values(**row))
        got = await sqlite_store.sessions.get(session.id)
        assert got is not None and got.title == ""
    await sqlite_store.sessions.update(session.id, title="kept")
    got = await sqlite_store.sessions.get(session.id)
    assert got is not None and got.title == "kept"


async def test_reads_see_each_commit_and_many_run_at_once(sqlite_store: Store) -> None:
    sessions = [await sqlite_store.sessions.create("alice", "tests.echo") for _ in range(5)]
    for n, session in enumerate(sessions):
        await sqlite_store.sessions.update(session.id, title=f"t{n}")
    got = await asyncio.gather(*(sqlite_store.sessions.get(session.id) for session in sessions * 10))
    assert [g.title if g else None for g in got] == [f"t{n}" for n in range(5)] * 10


async def test_a_call_cancelled_on_the_thread_waits_for_it_before_the_connection_is_used_again(
    sqlite_store: Store,
) -> None:
    """Cancelled while its connection's thread runs its call (a commit), a caller waits for the call
    to end: only then does the connection go back to the pool, where the next user would run its
    statements on the loop's thread while the worker thread still used the connection."""
    gate, inside = threading.Event(), threading.Event()
    conn = await sqlite_store._db.engine.connect()
    try:
        driver = (await conn.get_raw_connection()).driver_connection
        assert isinstance(driver, OneHopConnection)

        def slow(_db: sqlite3.Connection) -> None:
            inside.set()
            gate.wait(30)

        call = asyncio.create_task(driver.run(slow))
        await asyncio.to_thread(inside.wait, 30)
        call.cancel()
        for _ in range(20):
            await asyncio.sleep(0)
        assert not call.done()  # still waiting for the thread, not cancelled under it
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await call
    finally:
        gate.set()
        await conn.close()


@pytest.mark.parametrize("cancelled", [False, True])
async def test_a_close_overtaken_by_a_stop_ends(tmp_path: Path, cancelled: bool) -> None:
    """SQLAlchemy's terminate of a connection whose call was cancelled: `close()` runs in a task and
    the connection is stopped before that close's own stop. The close ends, also when it is
    cancelled meanwhile (`asyncio.run` cancels what is left at the loop's end, and waits for it:
    the close waited forever for a stop the ended thread never answered, and a server with it)."""
    connection = await connect(str(tmp_path / "cage.db"))
    closing = asyncio.create_task(connection.close())
    await asyncio.sleep(0)  # the close's call is queued on the worker thread
    assert connection.stop() is not None  # the terminate's own stop, first
    if cancelled:
        closing.cancel()
    done, _ = await asyncio.wait([closing], timeout=10)
    assert closing in done
    await asyncio.to_thread(connection._thread.join, 10)
    assert not connection._thread.is_alive()
    assert connection.stop() is None  # stopped: nothing to wait for


def test_a_stop_whose_loop_has_ended_lets_the_thread_end_quietly(tmp_path: Path) -> None:
    """A stop nobody awaits (the terminate's), answered after its event loop closed: the worker
    thread ends without calling the closed loop (it died with 'Event loop is closed')."""
    gate = threading.Event()
    failures: list[threading.ExceptHookArgs] = []
    hook, threading.excepthook = threading.excepthook, failures.append

    async def stop_and_leave() -> OneHopConnection:
        connection = await connect(str(tmp_path / "cage.db"))
        connection._tx.put_nowait((None, lambda: gate.wait(30)))  # the thread is busy
        assert connection.stop() is not None
        return connection

    try:
        connection = asyncio.run(stop_and_leave())  # the loop closes before the thread stops
        gate.set()
        connection._thread.join(10)
    finally:
        gate.set()
        threading.excepthook = hook
    assert not connection._thread.is_alive()
    assert failures == []
