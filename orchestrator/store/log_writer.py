"""The event log's group commit, one round trip per batch: SQL the driver runs as it is.

A batch is written as one unit of work on the driver's own connection, below SQLAlchemy: on SQLite
one call on the connection's worker thread (`BEGIN IMMEDIATE`, the sessions' compare-and-set, the
rows, `COMMIT`), on Postgres one statement, which Postgres runs as its own transaction (the
compare-and-set, the rows and the notices together; a compare-and-set that loses aborts the whole
statement). Either way the loop waits for the database once per batch, where the same work through
the ORM took a dozen awaits, each of them a wait in the loop's queue on a busy server.

The compare-and-set needs no read first: the hub stamps a session's events from its emitter, so a
batch's first event for a session names the `last_seq` it continues (its seq - 1). When another
writer moved the session meanwhile (another replica, a write outside the queue) or the rows clash,
nothing is written and `write` says so; the caller then writes the batch's appends one at a time,
each with its exact error.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from orchestrator.store.notify import EVENTS_CHANNEL
from orchestrator.store.sqlite_driver import WRITE_BEGIN, OneHopConnection
from orchestrator.store.tables import SessionRow
from orchestrator.stream import Event, event_json


@dataclass(frozen=True)
class Batch:
    """What one group commit writes: every session's move of `last_seq`, and the rows."""

    moves: tuple[tuple[str, int, int], ...]
    """(session id, `last_seq` it must have, `last_seq` it gets), sorted by session id."""
    events: tuple[tuple[str, Event], ...]
    """(session id, stamped event), in the order they are written."""


def plan(appends: Sequence[tuple[str, Sequence[Event]]]) -> Batch | None:
    """The batch writing `appends` (in queue order), if each continues the one before it of the
    same session; None when one does not (a gap or a duplicate: it needs the log's word)."""
    moves: dict[str, list[int]] = {}
    events: list[tuple[str, Event]] = []
    for session_id, appended in appends:
        first = appended[0].seq
        move = moves.get(session_id)
        if move is None:
            move = moves[session_id] = [first - 1, first - 1]
        if first != move[1] + 1 or first < 1:
            return None
        for offset, event in enumerate(appended):
            if event.seq != first + offset:
                return None
            events.append((session_id, event))
        move[1] = appended[-1].seq
    return Batch(tuple((c, old, new) for c, (old, new) in sorted(moves.items())), tuple(events))


class LogMoved(Exception):
    """A session's `last_seq` was not what the batch continues, or its rows were there already:
    nothing was written."""


async def write(conn: AsyncConnection, batch: Batch, now: datetime) -> None:
    """Write `batch` in one transaction on `conn` (checked out, no transaction begun).

    Raises:
        LogMoved: a compare-and-set lost or the rows clash; nothing was written.
        sqlite3.Error, asyncpg.PostgresError, OSError: the database failed.
    """
    raw = await conn.get_raw_connection()
    driver = raw.driver_connection
    if isinstance(driver, OneHopConnection):
        at = SessionRow.__table__.c.updated_at.type.bind_processor(conn.dialect)
        await driver.run(lambda db: _write_sqlite(db, batch, at(now) if at is not None else now))
    else:
        await _write_postgres(driver, batch, now)


async def write_in(conn: AsyncConnection, batch: Batch, now: datetime) -> None:
    """SQLite: the batch's statements in `conn`'s open write transaction, which the caller
    commits (with the turns' writes that share it, `EventLog.joined`).

    Raises:
        LogMoved: a compare-and-set lost or the rows clash (the caller rolls back).
    """
    at = SessionRow.__table__.c.updated_at.type.bind_processor(conn.dialect)
    stamp = at(now) if at is not None else now
    moves = [(new, stamp, session, old) for session, old, new in batch.moves]
    moved = await conn.exec_driver_sql(_SQLITE_MOVE, moves)
    if moved.rowcount != len(batch.moves):
        raise LogMoved
    try:
        await conn.exec_driver_sql(_SQLITE_ROWS, [_values(session, event) for session, event in batch.events])
    except IntegrityError as exc:
        raise LogMoved from exc


_SQLITE_MOVE = "UPDATE sessions SET last_seq = ?, updated_at = ? WHERE id = ? AND last_seq = ?"
_SQLITE_ROWS = "INSERT INTO events (session_id, seq, turn_id, type, payload, ts) VALUES (?, ?, ?, ?, ?, ?)"


def _write_sqlite(db: sqlite3.Connection, batch: Batch, now: Any) -> None:
    """On the connection's worker thread: the whole transaction, committed or rolled back."""
    db.execute(WRITE_BEGIN)
    try:
        moved = db.executemany(_SQLITE_MOVE, [(new, now, session, old) for session, old, new in batch.moves])
        if moved.rowcount != len(batch.moves):
            raise LogMoved
        try:
            db.executemany(_SQLITE_ROWS, [_values(session, event) for session, event in batch.events])
        except sqlite3.IntegrityError as exc:
            raise LogMoved from exc
        db.commit()
    except BaseException:
        if db.in_transaction:
            db.rollback()
        raise


def _values(session_id: str, event: Event) -> tuple[str, int, str, str, str, int]:
    return (session_id, event.seq, event.turn_id, event.type, event_json(event), event.ts)


_POSTGRES_WRITE = f"""
WITH wanted AS (
    SELECT * FROM unnest($1::varchar[], $2::bigint[], $3::bigint[]) AS w(id, old, new)
), locked AS (
    SELECT c.id FROM sessions AS c WHERE c.id = ANY($1::varchar[]) ORDER BY c.id FOR UPDATE
), moved AS (
    UPDATE sessions AS c SET last_seq = w.new, updated_at = $4
    FROM wanted AS w JOIN locked AS l ON l.id = w.id
    WHERE c.id = w.id AND c.last_seq = w.old
    RETURNING c.id, c.last_seq
), checked AS (
    SELECT 1 / (CASE WHEN count(*) = cardinality($1::varchar[]) THEN 1 ELSE 0 END) AS ok FROM moved
), inserted AS (
    INSERT INTO events (session_id, seq, turn_id, type, payload, ts)
    SELECT * FROM unnest($5::varchar[], $6::bigint[], $7::varchar[], $8::varchar[], $9::json[], $10::bigint[])
    RETURNING 1
)
SELECT (SELECT ok FROM checked) AS ok,
       (SELECT count(*) FROM inserted) AS rows,
       (SELECT count(pg_notify('{EVENTS_CHANNEL}', m.id || ' ' || m.last_seq)) FROM moved AS m) AS notices
"""
"""One statement, so one transaction: a session whose `last_seq` is not the one expected makes the
`checked` division fail, which aborts all of it (rows, moves and notices). The sessions' rows are
locked in id order first, so two processes' batches wait for each other instead of deadlocking.
Each moved session's notice (`<session> <last seq>`, as `events.notice`) goes out on commit."""


async def prepare_postgres(db: Any) -> None:
    """Run the Postgres statement once with nothing to write on the asyncpg connection `db` (locks
    no row, inserts and notifies nothing), so the driver has it prepared, its array and `json`
    types looked up, before a batch needs it on this connection.

    Raises:
        asyncpg.PostgresError, OSError: the database failed, or has no event log yet.
    """
    await db.fetchrow(_POSTGRES_WRITE, [], [], [], datetime.now(UTC), [], [], [], [], [], [])


async def _write_postgres(db: Any, batch: Batch, now: datetime) -> None:
    """On the asyncpg connection `db`, in autocommit: the statement is the transaction."""
    import asyncpg  # type: ignore[import-untyped]  # only a Postgres store loads the driver

    clashes = (asyncpg.DivisionByZeroError, asyncpg.UniqueViolationError, asyncpg.ForeignKeyViolationError)

    sessions, olds, news = zip(*batch.moves, strict=True)
    columns = list(zip(*(_values(session, event) for session, event in batch.events), strict=True))
    try:
        await db.fetchrow(_POSTGRES_WRITE, list(sessions), list(olds), list(news), now, *map(list, columns))
    except clashes as exc:
        raise LogMoved from exc
