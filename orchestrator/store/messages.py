"""Session messages in order: the history a turn starts from."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, bindparam, func, insert, select
from sqlalchemy.engine import Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from orchestrator.errors import UsageError
from orchestrator.store.database import Database
from orchestrator.store.errors import RecordExists
from orchestrator.store.records import MessageRecord, NewMessage
from orchestrator.store.sessions import locked_session
from orchestrator.store.tables import MessageRow, table

MAX_HISTORY = 1000
_MESSAGES = table(MessageRow)
_LAST = select(func.max(_MESSAGES.c.sequence)).where(_MESSAGES.c.session_id == bindparam("p_session"))
_NEW_MESSAGES = insert(_MESSAGES)
_HISTORY = (  # every turn reads it: built once, Core rows (`Database.query`)
    select(_MESSAGES)
    .where(_MESSAGES.c.session_id == bindparam("p_session"), _MESSAGES.c.turn_id != bindparam("p_turn"))
    .order_by(_MESSAGES.c.sequence.desc())
    .limit(bindparam("p_limit", type_=Integer))
)


def message_record(row: MessageRow | Row[Any]) -> MessageRecord:
    """The record of a message's ORM object or of its Core row (the same names)."""
    return MessageRecord(
        id=row.id,
        session_id=row.session_id,
        turn_id=row.turn_id,
        role=row.role,
        content=row.content,
        assistant_id=row.assistant_id,
        created_at=row.created_at,
        sequence=row.sequence,
    )


def message_records(
    session_id: str, turn_id: str, messages: Sequence[NewMessage], now: datetime, last: int
) -> list[MessageRecord]:
    """The records of `messages` written after the session's message `last`."""
    return [
        MessageRecord(
            id=msg.id,
            session_id=session_id,
            turn_id=turn_id,
            role=msg.role,
            content=msg.content,
            assistant_id=msg.assistant_id,
            created_at=now,
            sequence=last + i,
        )
        for i, msg in enumerate(messages, start=1)
    ]


async def insert_messages(
    tx: AsyncSession, session_id: str, turn_id: str, messages: Sequence[NewMessage], now: datetime
) -> list[MessageRecord]:
    """Add messages after the session's last one, inside the caller's transaction (which must hold the
    session's lock, see `locked_session`, so that sequences cannot collide).

    Raises:
        RecordExists: a message id is taken.
    """
    if not messages:
        return []
    last = await tx.scalar(_LAST, {"p_session": session_id})
    records = message_records(session_id, turn_id, messages, now, last or 0)
    try:
        await tx.execute(_NEW_MESSAGES, [record.model_dump() for record in records])
    except IntegrityError as err:
        raise RecordExists("message", ", ".join(msg.id for msg in messages)) from err
    return records


class MessageRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, session_id: str, turn_id: str, messages: Sequence[NewMessage]) -> list[MessageRecord]:
        """Append messages to the session outside a turn's final write (e.g. the user's input, early).

        Raises:
            RecordNotFound: no such session.
        """
        async with self._db.write() as tx:
            now = self._db.clock()
            await locked_session(tx, session_id, now)
            return await insert_messages(tx, session_id, turn_id, messages, now)

    async def history(
        self, session_id: str, limit: int = 20, *, exclude_turn: str | None = None
    ) -> list[MessageRecord]:
        """The session's last `limit` messages, oldest first; without those of `exclude_turn` (the
        running turn, whose user messages are written when it starts).

        Raises:
            UsageError: `limit` outside 1..`MAX_HISTORY`.
        """
        if not 1 <= limit <= MAX_HISTORY:
            raise UsageError(f"limit must be between 1 and {MAX_HISTORY}, got {limit}")
        params = {"p_session": session_id, "p_turn": exclude_turn or "", "p_limit": limit}
        async with self._db.query() as conn:
            rows = (await conn.execute(_HISTORY, params)).all()
        return [message_record(row) for row in reversed(rows)]

    async def of_turn(self, turn_id: str) -> list[MessageRecord]:
        """The messages one turn added, in order."""
        query = select(MessageRow).where(MessageRow.turn_id == turn_id).order_by(MessageRow.sequence)
        async with self._db.read() as tx:
            return [message_record(row) for row in await tx.scalars(query)]
