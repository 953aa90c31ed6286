"""A turn's begin and end on Postgres, one statement each: SQL the driver runs as it is.

Through the ORM a begin was eleven round trips (`BEGIN`, the session touched, the turn looked up,
the turn row, the lease looked up, the owner's lock and count, the lease, the messages' last
sequence, the messages, `COMMIT`) and an end eight; on a busy server each round trip is a wait in
the event loop's queue and a share of its CPU. Here each is one statement on the driver's own
connection in autocommit, so one transaction: its data-modifying parts and its checks together,
and a check that fails (`1 / 0`) aborts all of it, as the event log's batches do
(`orchestrator.store.log_writer`). A begin under an owner's turn cap is a transaction instead: the
owner's advisory lock (sent with its `BEGIN` when the caller knows the owner), then the same
statement, whose count of the owner's leases must be taken after the lock is held (a statement
reads a snapshot taken as it starts), then `COMMIT`: three round trips.

Nothing here says why a statement was refused: on `Refused` nothing was written and the caller
writes the same begin or end again through its ORM statements, which raise the exact error (no
such session, a turn begun twice, a session busy, an owner at its cap, events that do not continue the
log) or, in the cases this statement does not cover (a turn persisted whole, without a begin), write
it.

Concurrency is that of the ORM statements: the session's row is locked by the statement's update of
it, and what the snapshot cannot see is caught by the unique keys (a lease of the session, the
messages' sequence in the session, the events' seq) and by the compare-and-set on `last_seq`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import JsonValue

from orchestrator.store.database import lock_number
from orchestrator.store.notify import EVENTS_CHANNEL
from orchestrator.store.records import NewMessage
from orchestrator.stream import Event, event_json


class Refused(Exception):
    """The statement was aborted (a check failed, a key clashed): nothing was written."""


@dataclass(frozen=True)
class Ended:
    """What the end's statement read while writing: the turn row's and the messages' part."""

    assistant_id: str
    created_at: datetime
    last_sequence: int
    """The session's last message sequence before the end's messages."""


_OWNER_LOCK = """
SELECT pg_advisory_xact_lock(
    ('x' || substr(encode(sha256(convert_to('owner:' || c.owner, 'UTF8')), 'hex'), 1, 16))::bit(64)::bigint
) FROM sessions AS c WHERE c.id = $1
"""
"""The owner's transaction advisory lock, keyed as `database.lock_number(f"owner:{owner}")` (the
first 8 bytes of the key's SHA-256, signed), so a begin of the ORM path counts in turn with it."""

_MESSAGES = """
last AS (
    SELECT coalesce(max(m.sequence), 0) AS n FROM messages AS m WHERE m.session_id = $1
), said AS (
    INSERT INTO messages (id, session_id, turn_id, role, content, assistant_id, created_at, sequence)
    SELECT m.id, $1, $2, m.role, m.content, m.assistant_id, $3, last.n + m.ord
    FROM last, unnest($4::varchar[], $5::varchar[], $6::json[], $7::varchar[])
        WITH ORDINALITY AS m(id, role, content, assistant_id, ord)
)"""
"""The messages after the session's last one: $1 session, $2 turn, $3 now, $4-$7 ids, roles, contents
(JSON text), assistant ids."""

_BEGIN = f"""
WITH session AS (
    UPDATE sessions AS c SET updated_at = $3 WHERE c.id = $1 RETURNING c.id, c.owner
), checked AS (
    SELECT 1 / (CASE WHEN EXISTS (SELECT 1 FROM session)
        AND NOT EXISTS (SELECT 1 FROM turns AS t WHERE t.id = $2)
        AND NOT EXISTS (SELECT 1 FROM turn_leases AS l WHERE l.session_id = $1)
        AND ($12::varchar IS NULL OR (SELECT owner FROM session) = $12::varchar)
        AND ($11::integer IS NULL OR (
            SELECT count(*) FROM turn_leases AS l JOIN sessions AS o ON o.id = l.session_id
            WHERE o.owner = (SELECT owner FROM session)
        ) < $11::integer)
        THEN 1 ELSE 0 END) AS ok
), turn AS (
    INSERT INTO turns (id, session_id, assistant_id, status, usage, created_at)
    SELECT $2, c.id, $8, 'running', '{{}}'::json, $3 FROM session AS c
), lease AS (
    INSERT INTO turn_leases (turn_id, session_id, replica_id, expires_at, created_at)
    SELECT $2, c.id, $9, $10::timestamptz, $3 FROM session AS c
), {_MESSAGES}
SELECT (SELECT ok FROM checked) AS ok, (SELECT n FROM last) AS last
"""
"""A turn's begin: the session touched (and locked), the turn's `running` row, its lease and the
user's messages, unless the session is missing, the turn exists, the session has a lease, the session's owner
is not the one given ($12, when given), or (with a cap, $11) the owner's leases reach the cap. $8
assistant, $9 replica, $10 the lease's expiry."""

_END = f"""
WITH moved AS (
    UPDATE sessions AS c SET
        updated_at = $3,
        last_seq = coalesce($9::bigint, c.last_seq),
        resume = CASE WHEN $10::jsonb IS NULL THEN c.resume
                      ELSE ((c.resume::jsonb || $10::jsonb) - $11::text[])::json END
    WHERE c.id = $1 AND ($8::bigint IS NULL OR c.last_seq = $8::bigint)
    RETURNING c.id, c.last_seq
), closed AS (
    UPDATE turns AS t SET status = $12, usage = $13::json
    WHERE t.id = $2 AND t.status = 'running'
    RETURNING t.assistant_id, t.created_at
), checked AS (
    SELECT 1 / (CASE WHEN EXISTS (SELECT 1 FROM moved) AND EXISTS (SELECT 1 FROM closed)
        THEN 1 ELSE 0 END) AS ok
), logged AS (
    INSERT INTO events (session_id, seq, turn_id, type, payload, ts)
    SELECT $1, e.* FROM unnest($14::bigint[], $15::varchar[], $16::varchar[], $17::json[], $18::bigint[]) AS e
), dropped AS (
    DELETE FROM turn_leases AS l WHERE l.turn_id = $2
), {_MESSAGES}
SELECT (SELECT ok FROM checked) AS ok,
       (SELECT assistant_id FROM closed) AS assistant_id,
       (SELECT created_at FROM closed) AS created_at,
       (SELECT n FROM last) AS last,
       (SELECT count(pg_notify('{EVENTS_CHANNEL}', m.id || ' ' || m.last_seq))
        FROM moved AS m WHERE $8::bigint IS NOT NULL) AS notices
"""
"""A turn's end: the session touched and, when the end carries events, its `last_seq` moved by
compare-and-set from $8 to $9 (with the notice `events.notice`); its resume state merged ($10 the
runners' new states, $11 those removed); the `running` turn closed ($12 status, $13 usage); the
events ($14-$18); the lease dropped; the messages. Refused unless the session's move and the turn's
close both happen."""


def _messages(messages: Sequence[NewMessage]) -> list[list[Any]]:
    return [
        [m.id for m in messages],
        [m.role for m in messages],
        [json.dumps(m.content) for m in messages],
        [m.assistant_id for m in messages],
    ]


def _clashes() -> tuple[type[BaseException], ...]:
    """The driver's errors of a statement that was aborted, leaving the connection as it was."""
    import asyncpg  # type: ignore[import-untyped]  # only a Postgres store loads the driver

    return (asyncpg.PostgresError,)


async def begin(
    db: Any,
    session_id: str,
    turn_id: str,
    assistant_id: str,
    messages: Sequence[NewMessage],
    now: datetime,
    *,
    replica_id: str,
    expires_at: datetime | None,
    owner_cap: int | None,
    owner: str | None = None,
) -> int:
    """Write a turn's begin on the asyncpg connection `db` (in autocommit); the session's last
    message sequence before the turn's messages. With `owner_cap`, in a transaction that first
    takes the advisory lock of the session's owner: with its `BEGIN` when the caller knows the owner
    (`owner`, which the statement checks), else in a statement of its own.

    Raises:
        Refused: nothing was written.
        asyncpg.InterfaceError, OSError: the database failed.
    """
    args = (
        session_id,
        turn_id,
        now,
        *_messages(messages),
        assistant_id,
        replica_id,
        expires_at,
        owner_cap,
        owner,
    )
    try:
        if owner_cap is None:
            row = await db.fetchrow(_BEGIN, *args)
        elif owner is None:
            async with db.transaction():
                await db.fetchval(_OWNER_LOCK, session_id)
                row = await db.fetchrow(_BEGIN, *args)
        else:  # one round trip for both (the simple protocol; the key is a number, nothing quoted)
            await db.execute(f"BEGIN; SELECT pg_advisory_xact_lock({lock_number(f'owner:{owner}'):d})")
            row = await db.fetchrow(_BEGIN, *args)
            await db.execute("COMMIT")
    except _clashes() as exc:
        if db.is_in_transaction():  # aborted: its own BEGIN, not asyncpg's transaction()
            await db.execute("ROLLBACK")
        raise Refused from exc
    return int(row["last"])


async def end(
    db: Any,
    session_id: str,
    turn_id: str,
    *,
    status: str,
    usage: Mapping[str, Any],
    events: Sequence[Event],
    messages: Sequence[NewMessage],
    resume: Mapping[str, JsonValue],
    now: datetime,
) -> Ended:
    """Write a turn's end on the asyncpg connection `db` (in autocommit). `events` must be
    stamped for the session and continue each other (the caller checks).

    Raises:
        Refused: nothing was written.
        asyncpg.InterfaceError, OSError: the database failed.
    """
    old, new = (events[0].seq - 1, events[-1].seq) if events else (None, None)
    kept = {runner: state for runner, state in resume.items() if state is not None}
    removed = [runner for runner, state in resume.items() if state is None]
    columns: list[list[Any]] = [
        [e.seq for e in events],
        [e.turn_id for e in events],
        [e.type for e in events],
        [event_json(e) for e in events],
        [e.ts for e in events],
    ]
    try:
        row = await db.fetchrow(
            _END,
            session_id,
            turn_id,
            now,
            *_messages(messages),
            old,
            new,
            json.dumps(kept) if resume else None,
            removed,
            status,
            json.dumps(dict(usage)),
            *columns,
        )
    except _clashes() as exc:
        raise Refused from exc
    return Ended(row["assistant_id"], row["created_at"], int(row["last"]))
