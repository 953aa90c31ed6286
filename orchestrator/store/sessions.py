"""Sessions (sessions): who owns them, which assistant, the runners' resume state.

Session ids are per owner: a client names its session by `client_id`, unique only among its owner's
sessions, and the row's primary key `id` is internal: `internal_session_id(owner, client_id)`, so two
owners using the same client id get two unrelated sessions and neither can detect or squat the other's.
Everything keyed by session (events, turns, messages, memory, sandboxes) uses the internal id.

`cage serve` caps the sessions one owner may have (`bind`, `CAGE_MAX_SESSIONS_PER_OWNER`): `create`
counts the owner's sessions and inserts in one transaction, under SQLite's write lock or a Postgres
advisory lock on the owner, so concurrent creates on any number of replicas never pass the cap.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import JsonValue
from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from orchestrator.store.database import Database, affected, transaction_lock
from orchestrator.store.errors import OwnerSessionsFull, RecordExists, RecordNotFound
from orchestrator.store.records import SessionRecord
from orchestrator.store.tables import CheckpointRow, SessionRow, TurnRow

_MAX_LIST = 1000
INTERNAL_PREFIX = "c"
"""Internal ids of client-named sessions are `c` + 40 hex digits (41 characters, within String(64))."""


def internal_session_id(owner: str, client_id: str) -> str:
    """The internal id of `owner`'s session named `client_id`: a digest of both (owners and client ids
    contain no NUL), so it is the same on every server and injective across owners."""
    digest = hashlib.sha256(f"{owner}\0{client_id}".encode()).hexdigest()
    return INTERNAL_PREFIX + digest[:40]


def session_record(row: SessionRow) -> SessionRecord:
    return SessionRecord(
        id=row.id,
        owner=row.owner,
        client_id=row.client_id,
        parent_id=row.parent_id,
        assistant_id=row.assistant_id,
        title=row.title,
        created_at=row.created_at,
        updated_at=row.updated_at,
        last_seq=row.last_seq,
        metadata=row.metadata_,
        resume=row.resume,
    )


async def locked_session(tx: AsyncSession, session_id: str, now: datetime) -> SessionRow:
    """The session row, touched (`updated_at`) so that Postgres holds its row lock until commit:
    concurrent turns of one session then run one after the other.

    Raises:
        RecordNotFound: no such session.
    """
    await tx.execute(update(SessionRow).where(SessionRow.id == session_id).values(updated_at=now))
    row = await tx.get(SessionRow, session_id, populate_existing=True)
    if row is None:
        raise RecordNotFound("session", session_id)
    return row


def merged_keys(current: Mapping[str, Any], changes: Mapping[str, JsonValue]) -> dict[str, Any]:
    """`current` with `changes` applied; a None state removes that runner's entry."""
    merged = dict(current)
    for runner, state in changes.items():
        if state is None:
            merged.pop(runner, None)
        else:
            merged[runner] = state
    return merged


async def _sessions_of(tx: AsyncSession, owner: str, limit: int) -> int:
    """How many sessions `owner` has, counted up to `limit` (the owner index, never more rows)."""
    some = select(SessionRow.id).where(SessionRow.owner == owner).limit(limit).subquery()
    return int(await tx.scalar(select(func.count()).select_from(some)) or 0)


class SessionRepository:
    def __init__(self, db: Database) -> None:
        self._db = db
        self.max_per_owner: int | None = None
        """The most sessions one owner may have (`bind`); None: no cap (`cage run`, tests)."""

    def bind(self, *, max_per_owner: int | None) -> None:
        """From now on `create` refuses an owner's session past `max_per_owner` (child sessions count)."""
        self.max_per_owner = max_per_owner

    async def create(
        self,
        owner: str,
        assistant_id: str,
        *,
        title: str = "",
        metadata: Mapping[str, JsonValue] | None = None,
        session_id: str | None = None,
        client_id: str | None = None,
        parent_id: str | None = None,
    ) -> SessionRecord:
        """A new session with an empty event log.

        `client_id` is the id its owner chose (the internal id is then `internal_session_id`);
        `session_id` sets the internal id itself (the client id is then the same). With neither, both
        are one random id. `parent_id` (internal) makes it a child session of that one.

        Raises:
            RecordExists: the owner has a session with this client id, or the internal id is taken.
            OwnerSessionsFull: the owner has `max_per_owner` sessions already (nothing was written).
        """
        now = self._db.clock()
        internal = session_id or (internal_session_id(owner, client_id) if client_id else uuid.uuid4().hex)
        row = SessionRow(
            id=internal,
            owner=owner,
            client_id=client_id or internal,
            parent_id=parent_id,
            assistant_id=assistant_id,
            title=title,
            created_at=now,
            updated_at=now,
            last_seq=0,
            metadata_=dict(metadata or {}),
            resume={},
        )
        try:
            async with self._db.write() as tx:
                if self.max_per_owner is not None:
                    await self._room_for(tx, owner, internal, self.max_per_owner)
                tx.add(row)
        except IntegrityError as err:
            raise RecordExists("session", row.id) from err
        return session_record(row)

    async def _room_for(self, tx: AsyncSession, owner: str, internal: str, limit: int) -> None:
        """Inside `create`'s transaction: refuse the owner's session past `limit`, except that a session
        which exists already (a concurrent create of the same id won) is `RecordExists`."""
        await transaction_lock(tx, f"sessions:{owner}")
        if await _sessions_of(tx, owner, limit) < limit:
            return
        if await tx.get(SessionRow, internal) is not None:
            raise RecordExists("session", internal)
        raise OwnerSessionsFull(owner, limit)

    async def get(self, session_id: str) -> SessionRecord | None:
        async with self._db.read() as tx:
            row = await tx.get(SessionRow, session_id)
            return None if row is None else session_record(row)

    async def find(self, owner: str, client_id: str) -> SessionRecord | None:
        """`owner`'s session named `client_id`; None when that owner has none (whoever else does)."""
        query = select(SessionRow).where(SessionRow.owner == owner, SessionRow.client_id == client_id)
        async with self._db.read() as tx:
            row = await tx.scalar(query)
            return None if row is None else session_record(row)

    async def require(self, session_id: str) -> SessionRecord:
        """Like `get`. Raises: RecordNotFound."""
        found = await self.get(session_id)
        if found is None:
            raise RecordNotFound("session", session_id)
        return found

    async def list(
        self, owner: str, *, assistant_id: str | None = None, parent_id: str | None = None, limit: int = 50
    ) -> list[SessionRecord]:
        """The owner's sessions (with `parent_id`, only that session's children), most recently
        active first."""
        query = select(SessionRow).where(SessionRow.owner == owner)
        if assistant_id is not None:
            query = query.where(SessionRow.assistant_id == assistant_id)
        if parent_id is not None:
            query = query.where(SessionRow.parent_id == parent_id)
        query = query.order_by(SessionRow.updated_at.desc(), SessionRow.id).limit(
            min(max(limit, 1), _MAX_LIST)
        )
        async with self._db.read() as tx:
            return [session_record(row) for row in await tx.scalars(query)]

    async def update(
        self,
        session_id: str,
        *,
        title: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> SessionRecord:
        """Change the title and/or merge keys into the metadata (a None value removes a key).

        Raises:
            RecordNotFound: no such session.
        """
        async with self._db.write() as tx:
            row = await locked_session(tx, session_id, self._db.clock())
            if title is not None:
                row.title = title
            if metadata:
                row.metadata_ = merged_keys(row.metadata_, metadata)
            return session_record(row)

    async def set_resume(self, session_id: str, runner: str, state: JsonValue) -> SessionRecord:
        """Store `runner`'s resume state for this session; None forgets it.

        Raises:
            RecordNotFound: no such session.
        """
        async with self._db.write() as tx:
            row = await locked_session(tx, session_id, self._db.clock())
            row.resume = merged_keys(row.resume, {runner: state})
            return session_record(row)

    async def delete(self, session_id: str) -> bool:
        """Delete the session with its messages, turns, event log and checkpoints. False when
        there was none."""
        async with self._db.write() as tx:
            turns = select(TurnRow.id).where(TurnRow.session_id == session_id)
            await tx.execute(delete(CheckpointRow).where(CheckpointRow.turn_id.in_(turns)))
            result = await tx.execute(delete(SessionRow).where(SessionRow.id == session_id))
            return bool(affected(result))
