"""Chat messages in order: the history a turn starts from."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import bindparam, func, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from orchestrator.errors import UsageError
from orchestrator.store.chats import locked_chat
from orchestrator.store.database import Database
from orchestrator.store.errors import RecordExists
from orchestrator.store.records import MessageRecord, NewMessage
from orchestrator.store.tables import MessageRow, table

MAX_HISTORY = 1000
_MESSAGES = table(MessageRow)
_LAST = select(func.max(_MESSAGES.c.sequence)).where(_MESSAGES.c.chat_id == bindparam("p_chat"))
_NEW_MESSAGES = insert(_MESSAGES)


def message_record(row: MessageRow) -> MessageRecord:
    return MessageRecord(
        id=row.id,
        chat_id=row.chat_id,
        turn_id=row.turn_id,
        role=row.role,
        content=row.content,
        assistant_id=row.assistant_id,
        created_at=row.created_at,
        sequence=row.sequence,
    )


async def insert_messages(
    tx: AsyncSession, chat_id: str, turn_id: str, messages: Sequence[NewMessage], now: datetime
) -> list[MessageRecord]:
    """Add messages after the chat's last one, inside the caller's transaction (which must hold the
    chat's lock, see `locked_chat`, so that sequences cannot collide).

    Raises:
        RecordExists: a message id is taken.
    """
    if not messages:
        return []
    last = await tx.scalar(_LAST, {"p_chat": chat_id})
    records = [
        MessageRecord(
            id=msg.id,
            chat_id=chat_id,
            turn_id=turn_id,
            role=msg.role,
            content=msg.content,
            assistant_id=msg.assistant_id,
            created_at=now,
            sequence=(last or 0) + i,
        )
        for i, msg in enumerate(messages, start=1)
    ]
    try:
        await tx.execute(_NEW_MESSAGES, [record.model_dump() for record in records])
    except IntegrityError as err:
        raise RecordExists("message", ", ".join(msg.id for msg in messages)) from err
    return records


class MessageRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, chat_id: str, turn_id: str, messages: Sequence[NewMessage]) -> list[MessageRecord]:
        """Append messages to the chat outside a turn's final write (e.g. the user's input, early).

        Raises:
            RecordNotFound: no such chat.
        """
        async with self._db.write() as tx:
            now = self._db.clock()
            await locked_chat(tx, chat_id, now)
            return await insert_messages(tx, chat_id, turn_id, messages, now)

    async def history(
        self, chat_id: str, limit: int = 20, *, exclude_turn: str | None = None
    ) -> list[MessageRecord]:
        """The chat's last `limit` messages, oldest first; without those of `exclude_turn` (the
        running turn, whose user messages are written when it starts).

        Raises:
            UsageError: `limit` outside 1..`MAX_HISTORY`.
        """
        if not 1 <= limit <= MAX_HISTORY:
            raise UsageError(f"limit must be between 1 and {MAX_HISTORY}, got {limit}")
        query = (
            select(MessageRow)
            .where(MessageRow.chat_id == chat_id, MessageRow.turn_id != (exclude_turn or ""))
            .order_by(MessageRow.sequence.desc())
            .limit(limit)
        )
        async with self._db.read() as tx:
            rows = list(await tx.scalars(query))
        return [message_record(row) for row in reversed(rows)]

    async def of_turn(self, turn_id: str) -> list[MessageRecord]:
        """The messages one turn added, in order."""
        query = select(MessageRow).where(MessageRow.turn_id == turn_id).order_by(MessageRow.sequence)
        async with self._db.read() as tx:
            return [message_record(row) for row in await tx.scalars(query)]
