"""Turns: a turn's messages, last events, usage and resume state, written in one transaction."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from orchestrator.store.chats import locked_chat, merged_keys
from orchestrator.store.database import Database
from orchestrator.store.errors import RecordExists
from orchestrator.store.events import append_events
from orchestrator.store.messages import insert_messages, message_record
from orchestrator.store.records import TurnInput, TurnRecord
from orchestrator.store.tables import MessageRow, TurnRow
from orchestrator.stream import Usage


class TurnRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def persist(self, turn: TurnInput) -> TurnRecord:
        """Write the turn: all of it or, on any error, none of it.

        Raises:
            RecordNotFound: no such chat.
            RecordExists: the turn (or one of its message ids) was persisted already.
            EventSequenceError: `turn.events` do not continue the session's log.
        """
        async with self._db.write() as session:
            now = self._db.clock()
            chat = await locked_chat(session, turn.chat_id, now)
            if await session.get(TurnRow, turn.turn_id) is not None:
                raise RecordExists("turn", turn.turn_id)
            await append_events(session, turn.chat_id, turn.events, now)
            messages = await insert_messages(session, turn.chat_id, turn.turn_id, turn.messages, now)
            row = TurnRow(
                id=turn.turn_id,
                chat_id=turn.chat_id,
                assistant_id=turn.assistant_id,
                status=turn.status,
                usage=turn.usage.model_dump(mode="json"),
                created_at=now,
            )
            session.add(row)
            if turn.resume:
                chat.resume = merged_keys(chat.resume, turn.resume)
            await session.flush()
        return TurnRecord(
            id=row.id,
            chat_id=row.chat_id,
            assistant_id=row.assistant_id,
            status=turn.status,
            usage=turn.usage,
            created_at=row.created_at,
            messages=tuple(messages),
        )

    async def get(self, turn_id: str) -> TurnRecord | None:
        async with self._db.read() as session:
            row = await session.get(TurnRow, turn_id)
            return None if row is None else await _turn_record(session, row)

    async def of_chat(self, chat_id: str) -> list[TurnRecord]:
        """The chat's turns, oldest first."""
        query = select(TurnRow).where(TurnRow.chat_id == chat_id).order_by(TurnRow.created_at, TurnRow.id)
        async with self._db.read() as session:
            return [await _turn_record(session, row) for row in await session.scalars(query)]

    async def usage(self, chat_id: str) -> Usage:
        """The chat's cumulative usage: its turns' usages summed."""
        query = select(TurnRow.usage).where(TurnRow.chat_id == chat_id)
        total = Usage(scope="cumulative")
        async with self._db.read() as session:
            for data in await session.scalars(query):
                total = total + Usage.model_validate(data)
        return total


async def _turn_record(session: AsyncSession, row: TurnRow) -> TurnRecord:
    query = select(MessageRow).where(MessageRow.turn_id == row.id).order_by(MessageRow.sequence)
    messages = tuple(message_record(m) for m in await session.scalars(query))
    return TurnRecord(
        id=row.id,
        chat_id=row.chat_id,
        assistant_id=row.assistant_id,
        status=row.status,
        usage=Usage.model_validate(row.usage),
        created_at=row.created_at,
        messages=messages,
    )
