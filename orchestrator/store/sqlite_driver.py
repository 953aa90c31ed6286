"""SQLite under asyncio with at most one thread hop per transaction (an `aiosqlite` connection).

`aiosqlite` runs every call on the connection's own thread and wakes the event loop with the
result. SQLAlchemy's adapter makes several such calls per statement (open a cursor, execute, fetch,
close) and more per transaction (`BEGIN`, the commit, the pool's reset on return), so a
one-statement read cost about 18 hops and a turn's first write about 30. A hop is a hand-over of
the GIL between the loop's thread and the worker's and a wait in the loop's queue for the answer:
on a busy server hops, not SQL, were most of what SQLite cost, and most of an event's delay. The
SQL itself is small: a read by key takes a few microseconds, a commit's `fsync` milliseconds.

`OneHopConnection` keeps `aiosqlite`'s thread and queue (SQLAlchemy's adapter uses them as they
are) and runs on the loop's thread what cannot wait:

- a read transaction (`BEGIN`, then queries) runs there whole: in WAL mode a reader takes no lock
  that waits, and its commit writes nothing;
- a write transaction takes the write lock there (`BEGIN IMMEDIATE` with no busy wait) and runs its
  statements there: holding the lock, they wait for nothing. Only its `COMMIT`, whose `fsync`
  takes milliseconds, goes to the worker thread: one hop per write. When another process holds the
  lock, `BEGIN IMMEDIATE` waits for it on the worker thread instead (SQLite's busy timeout), never
  on the loop;
- a write in a read transaction, and a statement outside any transaction (the pragmas of a new
  connection, a migration's), go to the worker thread, one hop each;
- a transaction's `BEGIN` is sent with its first statement (`begin_with_next`), so a transaction
  that runs nothing sends nothing, and `commit`/`rollback` outside a transaction (the pool's reset
  on return) are no-ops.

`run(fn)` calls `fn(sqlite3.Connection)` on the worker thread: several statements in one hop.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any, TypeVar, cast

import aiosqlite

T = TypeVar("T")
READ_BEGIN = "BEGIN"
WRITE_BEGIN = "BEGIN IMMEDIATE"
_DEFAULT_TIMEOUT_S = 5.0
"""`sqlite3.connect`'s default busy timeout."""
_THREAD_ENDS: object = aiosqlite.core._STOP_RUNNING_SENTINEL
"""What an item returns to end `aiosqlite`'s worker thread."""


class _Mode(enum.Enum):
    NONE = "none"
    """No transaction: statements go to the worker thread (autocommit)."""
    READ = "read"
    """A read transaction: on the loop's thread."""
    WRITE = "write"
    """A write transaction holding the lock: statements on the loop's thread, the commit not."""
    WORKER = "worker"
    """A transaction the worker thread runs (a read that wrote)."""


def _is_query(sql: str) -> bool:
    return sql.lstrip()[:6].upper() == "SELECT"


def _answer(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _busy(exc: sqlite3.OperationalError) -> bool:
    return getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class OneHopConnection(aiosqlite.Connection):
    """An `aiosqlite.Connection` that hops to its thread only to wait (see the module doc)."""

    def __init__(self, connector: Callable[[], sqlite3.Connection], busy_timeout_s: float) -> None:
        super().__init__(connector, iter_chunk_size=64)
        self.begin_with_next: str | None = None
        """`BEGIN` or `BEGIN IMMEDIATE`, sent with the transaction's first statement."""
        self._busy_ms = round(busy_timeout_s * 1000)
        self._mode = _Mode.NONE
        self._stopping = threading.Lock()
        self._stopped = False
        """The worker thread ran its last item."""
        self._stop_waiters: list[asyncio.Future[None]] = []

    def cursor(self) -> OneHopCursor:  # type: ignore[override]
        return OneHopCursor(self)

    def stop(self) -> asyncio.Future[None] | None:
        """Close the connection and end the worker thread (after what is queued); the future, on
        the running loop (None outside one), is answered when the thread is done.

        `aiosqlite`'s own stop queued one item per call and the thread ended at the first: a second
        stop's future was never answered. SQLAlchemy makes two when a call is cancelled while the
        thread runs it (a transaction of a background job at a server's shutdown): its terminate
        starts `close()` in a task (which stops in its `finally`) and, cancelled again, stops the
        connection itself. `close()` then waited forever, and so did the end of the event loop
        (`asyncio.run` waits for the tasks it cancels): the server never exited. Here every stop
        gets its answer, and a future whose loop has closed meanwhile is skipped (the thread
        called a closed loop and died with a traceback)."""
        try:
            waiter: asyncio.Future[None] | None = asyncio.get_running_loop().create_future()
        except RuntimeError:
            waiter = None
        with self._stopping:
            if self._stopped:
                return None
            if waiter is not None:
                self._stop_waiters.append(waiter)
            if self._running:  # the first stop queues the thread's last item
                self._running = False
                self._tx.put_nowait((None, self._close_and_stop))
        return waiter

    def _close_and_stop(self) -> object:
        """The worker thread's last item: close, answer every stop, end the thread."""
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(sqlite3.Error):  # the thread ends all the same
                connection.close()
        with self._stopping:
            self._stopped = True
            waiters, self._stop_waiters = self._stop_waiters, []
        for waiter in waiters:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits any more
                waiter.get_loop().call_soon_threadsafe(_answer, waiter)
        return _THREAD_ENDS

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` on the worker thread (after the pending `BEGIN`, if any)."""
        begin, self.begin_with_next = self.begin_with_next, None
        if begin is not None:
            self._mode = _Mode.WORKER
        raw = self._conn

        def call() -> T:
            if begin is not None:
                raw.execute(begin)
            return fn(raw)

        return await self._call(call)

    async def _call(self, fn: Callable[[], T]) -> T:
        """`fn()` on the worker thread (`aiosqlite`'s queue). A caller cancelled meanwhile waits
        for `fn` to end before the cancel goes on: its connection then goes back to the pool only
        once the thread is done with it (a statement on the loop's thread next would use the
        connection while the thread still did)."""
        if not self._running or self._connection is None:
            raise ValueError("Connection closed")
        loop = asyncio.get_running_loop()
        result: asyncio.Future[T] = loop.create_future()
        ended: asyncio.Future[None] = loop.create_future()

        def settle(value: T | None, error: BaseException | None) -> None:
            if not result.done():
                if error is not None:
                    result.set_exception(error)
                else:
                    result.set_result(cast(T, value))
            if not ended.done():
                ended.set_result(None)

        def work() -> None:
            try:
                value = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                loop.call_soon_threadsafe(settle, None, exc)
            else:
                loop.call_soon_threadsafe(settle, value, None)

        self._tx.put_nowait((None, work))
        try:
            return await result
        except asyncio.CancelledError:
            await asyncio.wait([ended])
            raise

    async def here(self, sql: str) -> sqlite3.Connection | None:
        """Begin the pending transaction; the connection when `sql` may run on the loop's thread,
        None when it goes to the worker thread."""
        raw = self._conn
        begin, self.begin_with_next = self.begin_with_next, None
        if begin == READ_BEGIN:
            raw.execute(READ_BEGIN)
            self._mode = _Mode.READ
        elif begin is not None:
            await self._begin_write(raw, begin)
            self._mode = _Mode.WRITE
        if self._mode is _Mode.READ and not _is_query(sql):
            self._mode = _Mode.WORKER  # a read that writes: it may wait for the lock, and fsync
        if self._mode in (_Mode.READ, _Mode.WRITE) and raw.in_transaction:
            return raw
        return None

    async def _begin_write(self, raw: sqlite3.Connection, begin: str) -> None:
        """Take the write lock on the loop's thread if it is free, else wait for it on the
        worker thread (with the connection's busy timeout)."""
        raw.execute("PRAGMA busy_timeout = 0")
        try:
            raw.execute(begin)
            return
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                raise
        finally:
            raw.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        await self._call(lambda: raw.execute(begin))

    async def commit(self) -> None:
        await self._end(lambda raw: raw.commit(), here=(_Mode.READ,))

    async def rollback(self) -> None:
        await self._end(lambda raw: raw.rollback(), here=(_Mode.READ, _Mode.WRITE))

    async def _end(self, end: Callable[[sqlite3.Connection], None], *, here: tuple[_Mode, ...]) -> None:
        """End the transaction: on the loop's thread when that waits for nothing (a read's end, a
        write's rollback), else on the worker thread (a write's commit waits for its fsync)."""
        self.begin_with_next = None
        mode, self._mode = self._mode, _Mode.NONE
        raw = self._connection
        if raw is None or not raw.in_transaction:
            return
        if mode in here:
            end(raw)
        else:
            await self._call(lambda: end(raw))


def connect(database: str, **kwargs: Any) -> OneHopConnection:
    """Like `aiosqlite.connect`: the connection is made on its thread when awaited."""

    def connector() -> sqlite3.Connection:
        return cast(sqlite3.Connection, sqlite3.connect(database, **kwargs))

    connection = OneHopConnection(connector, float(kwargs.get("timeout", _DEFAULT_TIMEOUT_S)))
    connection._thread.daemon = True  # as SQLAlchemy sets aiosqlite's: never holds the process up
    return connection


class OneHopCursor:
    """What SQLAlchemy's adapter needs of an `aiosqlite.Cursor`, with the rows fetched by the
    statement's own call."""

    arraysize = 1

    def __init__(self, connection: OneHopConnection) -> None:
        self._connection = connection
        self._cursor: sqlite3.Cursor | None = None
        self._rows: deque[Any] = deque()

    def __await__(self) -> Generator[Any, None, OneHopCursor]:
        return self._self().__await__()

    async def _self(self) -> OneHopCursor:
        return self

    async def __aenter__(self) -> OneHopCursor:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> OneHopCursor:
        params = () if parameters is None else parameters
        raw = await self._connection.here(sql)
        if raw is not None:
            self._cursor, self._rows = _fetched(raw, sql, params)
        else:
            self._cursor, self._rows = await self._connection.run(lambda raw: _fetched(raw, sql, params))
        return self

    async def executemany(self, sql: str, parameters: Iterable[Sequence[Any]]) -> OneHopCursor:
        raw = await self._connection.here(sql)
        if raw is not None:
            self._cursor = raw.executemany(sql, parameters)
        else:
            self._cursor = await self._connection.run(lambda raw: raw.executemany(sql, parameters))
        self._rows = deque()
        return self

    async def fetchone(self) -> Any:
        return self._rows.popleft() if self._rows else None

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        count = min(self.arraysize if size is None else size, len(self._rows))
        return [self._rows.popleft() for _ in range(count)]

    async def fetchall(self) -> list[Any]:
        rows = list(self._rows)
        self._rows.clear()
        return rows

    async def close(self) -> None:
        self._rows.clear()

    @property
    def description(self) -> Any:
        return None if self._cursor is None else self._cursor.description

    @property
    def rowcount(self) -> int:
        return -1 if self._cursor is None else self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return None if self._cursor is None else self._cursor.lastrowid


def _fetched(raw: sqlite3.Connection, sql: str, params: Sequence[Any]) -> tuple[sqlite3.Cursor, deque[Any]]:
    cursor = raw.execute(sql, params)
    return cursor, deque(cursor.fetchall()) if cursor.description is not None else deque()
