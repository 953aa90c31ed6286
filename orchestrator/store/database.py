"""The async engine and its transactions: SQLite pragmas, write locks, and error translation.

SQLite: every connection runs with foreign keys on, WAL and a busy timeout, and a write transaction
starts with `BEGIN IMMEDIATE`, so two writers queue on the lock instead of failing halfway through
with "database is locked". Within one process, SQLite's writers also take turns (`WriterTurns`)
before they begin: SQLite's own busy handler polls with growing sleeps, so under load a writer could
starve behind others for the whole busy timeout. The turns are first come, first served, except
that the writes carrying events (the event log's group commit, a turn's end) go ahead of the other
waiting writers: live clients wait for them, and the other writes can wait. Postgres needs none of this:
the repositories guard their races with compare-and-set updates and unique keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import structlog
from sqlalchemy import Delete, event, exc, literal, select, text
from sqlalchemy.engine import URL, Connection, CursorResult, Result, make_url
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import ConnectionPoolEntry, Pool

from orchestrator.store import log_writer, sqlite_driver
from orchestrator.store.errors import StoreError

log = structlog.get_logger(__name__)

Clock = Callable[[], datetime]
WRITE_OPTION = "cage_write"
"""The execution option of a connection whose transactions write (SQLite: `BEGIN IMMEDIATE`)."""
_SQLITE_BUSY_MS = 10_000
_WRITER_QUEUE_S = 60.0
"""SQLite: how long a writer may wait behind this process's other writers (a queue that moves,
unlike another process's lock, so it gets longer than the busy timeout)."""
_POOL_SIZE = 16
"""SQLite: connections kept open (plus up to 10 more at peaks, closed again after use): a busy
server has many sessions reading at once, and a connection opened per query (an aiosqlite thread)
costs more than the query."""
_POSTGRES_POOL_SIZE = 26
"""Postgres: connections kept open once opened, and the most there are (no overflow: the same 26
as SQLite's 16 + 10). A connection opened at a peak and closed after use was a login (TCP, the SSL
probe, SCRAM), the driver's type introspection and a fresh `PREPARE` of every statement: fifty busy
sessions opened one every few turns, a dozen round trips and more CPU than the turn's own queries."""


def affected(result: Result[Any]) -> int:
    """Rows an UPDATE or DELETE touched."""
    return cast("CursorResult[Any]", result).rowcount


def utc_now() -> datetime:
    return datetime.now(UTC)


def lock_number(key: str) -> int:
    """The 64-bit key of a Postgres advisory lock named `key`."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


_XACT_LOCK = text("SELECT pg_advisory_xact_lock(:k)")


async def transaction_lock(tx: AsyncSession, key: str) -> None:
    """Postgres: wait for the transaction advisory lock named `key`, held until this transaction
    ends, so every replica's transactions that count and then write under `key` take turns.
    SQLite: nothing to do (a write transaction holds the database's write lock already)."""
    if tx.get_bind().dialect.name == "postgresql":
        await tx.execute(_XACT_LOCK, {"k": lock_number(key)})


def sqlite_path(url: URL) -> Path | None:
    """The file of a SQLite URL; None for other engines and in-memory databases."""
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database)


def ensure_sqlite_dir(url: URL) -> None:
    """Create the directory of a SQLite file (blocking: call it from sync code or a worker thread)."""
    path = sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)


def create_engine(url: str | URL, *, poolclass: type[Pool] | None = None) -> AsyncEngine:
    """An async engine for `url`, with the SQLite set-up above when it is SQLite."""
    parsed = make_url(url)
    pool: dict[str, Any] = {"poolclass": poolclass} if poolclass is not None else {"pool_size": _POOL_SIZE}
    if parsed.get_backend_name() != "sqlite":
        if poolclass is None:
            pool = {"pool_size": _POSTGRES_POOL_SIZE, "max_overflow": 0}
        engine = create_async_engine(parsed, **pool)
        event.listen(engine.sync_engine, "connect", _used)
        event.listen(engine.sync_engine, "checkin", _used)
        event.listen(engine.sync_engine, "checkout", _ping_if_idle)
        event.listen(engine.sync_engine, "checkout", _prepare_log_writes)
        return engine
    engine = create_async_engine(parsed, connect_args={"timeout": _SQLITE_BUSY_MS / 1000}, **pool)
    event.listen(engine.sync_engine, "do_connect", _sqlite_driver)
    event.listen(engine.sync_engine, "connect", _sqlite_connect)
    event.listen(engine.sync_engine, "begin", _sqlite_begin)
    return engine


_IDLE_SINCE = "cage_idle_since"
_PING_AFTER_S = 5.0
"""Postgres: a pooled connection idle longer than this is pinged before use (a server restart
meanwhile would have closed it)."""


def _used(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    record.info[_IDLE_SINCE] = time.monotonic()


_LOG_PREPARED = "cage_log_prepared"


def _prepare_log_writes(dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
    """Postgres: a pooled connection prepares the event log's group commit statement the first
    time it is checked out. Prepared by the first batch written on it instead, it held that batch
    and every event queued behind it: the PREPARE of that statement (and the driver's look-up of
    its types) took 10-25 ms on a busy server against 0.5 ms for a write, once for each of the
    pool's 26 connections, most of them in a 50-session run's first second: most of its p99 delay
    on Postgres. While the database has no event log yet (the migrations' connections) it is tried
    again at the next checkout; a failing database is left to the query that follows."""
    if record.info.get(_LOG_PREPARED):
        return
    try:
        dbapi_connection.run_async(log_writer.prepare_postgres)
    except Exception as exc:  # noqa: BLE001 - only a head start: the first write prepares it anyway
        log.debug("database.log_writes_not_prepared", error=type(exc).__name__)
        return
    record.info[_LOG_PREPARED] = True


def _ping_if_idle(dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
    """Postgres: ping a connection before use when it has been idle a while; a dead one is
    replaced (`DisconnectionError` makes the pool connect again). SQLAlchemy's `pool_pre_ping`
    pings every checkout, and its asyncpg ping is three round trips (`BEGIN`, `;`, `ROLLBACK`):
    on a busy server that was more round trips than the queries themselves, and each is a wait
    in the event loop's queue."""
    idle_since = record.info.get(_IDLE_SINCE)
    if idle_since is not None and time.monotonic() - idle_since < _PING_AFTER_S:
        return
    try:
        dbapi_connection.ping()
    except Exception as error:
        raise exc.DisconnectionError(f"connection lost while idle: {type(error).__name__}") from error


def _sqlite_driver(_dialect: Any, _record: ConnectionPoolEntry, _cargs: Any, cparams: dict[str, Any]) -> None:
    """Connect with `OneHopConnection` instead of a plain `aiosqlite` one (same arguments)."""
    cparams["async_creator_fn"] = sqlite_driver.connect


def _sqlite_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    # The driver's own implicit BEGIN would defeat BEGIN IMMEDIATE; `_sqlite_begin` emits it instead.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    for pragma in ("foreign_keys=ON", "journal_mode=WAL", f"busy_timeout={_SQLITE_BUSY_MS}"):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    begin = "BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE_OPTION, False) else "BEGIN"
    driver = conn.connection.driver_connection
    if isinstance(driver, sqlite_driver.OneHopConnection):
        driver.begin_with_next = begin  # sent with the transaction's first statement, in its hop
    else:
        conn.exec_driver_sql(begin)


def writing(engine: AsyncEngine) -> AsyncEngine:
    """The same engine (and pool) whose transactions take SQLite's write lock up front."""
    return engine.execution_options(**{WRITE_OPTION: True})


class WriterTurns:
    """SQLite: the order in which one event loop's writers take the database's write lock. First
    come, first served, except that a writer `ahead` (one that carries events live clients wait
    for: the event log's group commit, a turn's end) goes before every other waiting writer. The
    group commit asks again only after its batch and each turn ends once, so the others still get
    their turn: none starves."""

    def __init__(self) -> None:
        self._held = False
        self._ahead: deque[asyncio.Future[None]] = deque()
        self._rest: deque[asyncio.Future[None]] = deque()

    async def acquire(self, *, ahead: bool = False) -> None:
        if not self._held:  # then whoever is still queued was cancelled: none is owed the turn
            self._held = True
            return
        queue = self._ahead if ahead else self._rest
        waiter = asyncio.get_running_loop().create_future()
        queue.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():  # handed the turn while being cancelled
                self.release()
            else:
                with contextlib.suppress(ValueError):  # a release may have skipped it already
                    queue.remove(waiter)
            raise

    def release(self) -> None:
        """Hand the turn to the next waiter (the lock stays held), or free it."""
        for queue in (self._ahead, self._rest):
            while queue:
                waiter = queue.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    return
        self._held = False


class Database:
    """Sessions on one engine: `read()` for queries, `write()` for anything that changes rows."""

    def __init__(self, engine: AsyncEngine, clock: Clock = utc_now) -> None:
        self.engine = engine
        self.clock = clock
        sqlite = engine.dialect.name == "sqlite"
        reads = engine if sqlite else engine.execution_options(isolation_level="AUTOCOMMIT")
        self._reads = reads
        self._read = async_sessionmaker(reads, expire_on_commit=False)
        """Postgres reads run in autocommit: one round trip a query, no `BEGIN`/`COMMIT` (in READ
        COMMITTED each statement has a snapshot of its own anyway)."""
        self._write = async_sessionmaker(writing(engine), expire_on_commit=False)
        self._writers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WriterTurns] | None = (
            weakref.WeakKeyDictionary() if sqlite else None
        )
        """SQLite: the writers' turns, one per event loop (a store may outlive a loop)."""

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """A session in a read transaction (SQLite: a deferred one, which takes no write lock)."""
        with db_errors():
            async with self._session(self._read) as tx, tx.begin():
                yield tx

    @contextlib.asynccontextmanager
    async def query(self) -> AsyncIterator[AsyncConnection]:
        """A connection for Core reads (no ORM object), as `read()` reads (Postgres: autocommit;
        SQLite: a deferred read transaction) without a session: a session, its transaction and
        the task SQLAlchemy closes it in cost a Postgres read a third of its CPU again. Closed in
        place: with no transaction to roll back (Postgres) or its rollback on the loop's thread
        (SQLite), the close waits for nothing, so no cancellation can stop it half-way."""
        with db_errors():
            conn = await self._reads.connect()
            try:
                yield conn
            finally:
                await conn.close()

    @contextlib.asynccontextmanager
    async def write(self, *, ahead: bool = False) -> AsyncIterator[AsyncSession]:
        """A session in a write transaction, committed when the block ends without an error.
        `ahead`: on SQLite, go before this process's other waiting writers (`WriterTurns`).

        Raises:
            StoreError: the database failed, or (SQLite) this process's other writers kept this
                one waiting for over a minute.
        """
        with db_errors():
            async with self.writer_turn(ahead=ahead), self._session(self._write) as tx, tx.begin():
                yield tx

    @contextlib.asynccontextmanager
    async def _session(self, maker: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
        """A session closed when the block ends. SQLAlchemy closes it in a task of its own, shielded
        from the caller's cancellation, since a close that stops half-way (Postgres: the connection's
        reset) loses the connection; that task costs the caller a turn of the event loop, several
        milliseconds on a busy server, for each session. A SQLite session's close waits for
        nothing (`sqlite_driver`), so no cancellation can stop it half-way: it is closed in place."""
        if self._writers is None:
            async with maker() as tx:
                yield tx
            return
        tx = maker()
        try:
            yield tx
        finally:
            await tx.close()

    @contextlib.asynccontextmanager
    async def statement(self) -> AsyncIterator[AsyncSession]:
        """A session for one writing statement that is atomic on its own (an upsert): Postgres
        runs it in autocommit, one round trip instead of three (`BEGIN`, it, `COMMIT`); SQLite in a
        write transaction, as `write()`.

        Raises:
            StoreError: the database failed.
        """
        if self._writers is not None:
            async with self.write() as tx:
                yield tx
            return
        with db_errors():
            async with self._session(self._read) as tx:  # Postgres reads run in autocommit
                yield tx

    @contextlib.asynccontextmanager
    async def driver(self) -> AsyncIterator[Any]:
        """Postgres: a pooled connection's own asyncpg connection, in autocommit (each statement is
        its own transaction unless the block begins one), for statements run as they are, below
        SQLAlchemy (`turn_writer`). A block that ends with a Postgres error leaves the connection as
        it was; one that ends in any other way (the connection failed, a cancel mid-statement)
        drops it.

        Raises:
            StoreError: the database failed (connecting, or the block's error is not Postgres's).
        """
        import asyncpg  # type: ignore[import-untyped]  # only a Postgres store loads the driver

        with db_errors():
            conn = await self.engine.connect()
        try:
            raw = await conn.get_raw_connection()
            yield raw.driver_connection
        except asyncpg.PostgresError:
            raise
        except BaseException as error:
            with contextlib.suppress(Exception):
                await conn.invalidate()
            if isinstance(error, Exception) and not isinstance(error, StoreError):
                reason = f"{type(error).__name__}: {_first_line(error)}"
                raise StoreError(f"database unavailable ({reason})") from error
            raise
        finally:
            await conn.close()

    async def delete(self, stmt: Delete) -> int:
        """Run a DELETE in a write transaction and return how many rows went; when a read finds
        no row it would delete, take no write lock at all (on SQLite that is a turn behind every
        other writer of the process, and most deletes of a turn's leftovers find nothing)."""
        probe = select(literal(1)).select_from(stmt.table).limit(1)
        if stmt.whereclause is not None:
            probe = probe.where(stmt.whereclause)
        async with self.read() as tx:
            if await tx.scalar(probe) is None:
                return 0
        async with self.write() as tx:
            return affected(await tx.execute(stmt))

    @contextlib.asynccontextmanager
    async def writer_turn(self, *, ahead: bool = False) -> AsyncIterator[None]:
        """SQLite: this process's turn to write (`WriterTurns`), for a writer that begins its
        transaction itself (the event log's group commit); nothing to wait for on Postgres.

        Raises:
            StoreError: this process's other writers kept this one waiting for over a minute.
        """
        if self._writers is None:
            yield
            return
        turns = self._writers.setdefault(asyncio.get_running_loop(), WriterTurns())
        try:
            async with asyncio.timeout(_WRITER_QUEUE_S):
                await turns.acquire(ahead=ahead)
        except TimeoutError:
            raise StoreError(
                f"database unavailable (over {_WRITER_QUEUE_S:.0f} s behind this process's other writers)"
            ) from None
        try:
            yield
        finally:
            turns.release()

    async def aclose(self) -> None:
        await self.engine.dispose()


@contextlib.contextmanager
def db_errors() -> Iterator[None]:
    """Turn driver failures into `StoreError`. Integrity errors pass: repositories give them meaning."""
    try:
        yield
    except (exc.OperationalError, exc.InterfaceError) as err:
        reason = f"{type(err.orig).__name__}: {_first_line(err.orig)}"
        raise StoreError(f"database unavailable ({reason})") from err
    except OSError as err:
        raise StoreError(f"database unavailable ({type(err).__name__}: {err.strerror or err})") from err


def _first_line(orig: BaseException | None) -> str:
    text = str(orig) if orig is not None else ""
    return text.splitlines()[0][:200] if text else ""
