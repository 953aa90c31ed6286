"""Turns: a turn's messages, last events, usage and resume state, written in one transaction.

A turn is written twice: `begin` records a `running` row and the user's messages as the turn starts
(so a crash loses neither), `persist` closes it with its answer, last events and usage. A row still
`running` when a new process starts is a turn the old one never finished (`unfinished`); recovery
closes it with `close_unfinished`.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from orchestrator.store.chats import locked_chat, merged_keys
from orchestrator.store.database import Database
from orchestrator.store.errors import RecordExists, TurnRunning
from orchestrator.store.events import append_events
from orchestrator.store.leases import LeaseRepository, end_turn_lease
from orchestrator.store.messages import insert_messages, message_record
from orchestrator.store.records import FinishedTurn, NewMessage, TurnRecord
from orchestrator.store.tables import MessageRow, TurnRow
from orchestrator.stream import Event, Usage

RUNNING = "running"


class TurnRepository:
    def __init__(self, db: Database, leases: LeaseRepository) -> None:
        self._db = db
        self._leases = leases

    async def begin(
        self, chat_id: str, turn_id: str, assistant_id: str, messages: Sequence[NewMessage]
    ) -> None:
        """Record a starting turn: a `running` row, its lease (`orchestrator.store.leases`) and the
        user's new messages.

        Raises:
            RecordNotFound: no such chat.
            RecordExists: the turn (or one of the message ids) exists already.
            TurnRunning: the chat runs a turn already, on this replica or another one.
            OwnerTurnsRunning: the owner runs its cap of turns already, over every replica.
        """
        try:
            await self._begin(chat_id, turn_id, assistant_id, messages)
        except IntegrityError as exc:  # a lease of the chat committed between the check and the insert
            held = await self._leases.turn_of_chat(chat_id)
            if held is None:
                raise
            raise TurnRunning(chat_id, held.turn_id, held.replica_id) from exc

    async def _begin(
        self, chat_id: str, turn_id: str, assistant_id: str, messages: Sequence[NewMessage]
    ) -> None:
        async with self._db.write() as session:
            now = self._db.clock()
            chat = await locked_chat(session, chat_id, now)
            if await session.get(TurnRow, turn_id) is not None:
                raise RecordExists("turn", turn_id)
            session.add(
                TurnRow(
                    id=turn_id,
                    chat_id=chat_id,
                    assistant_id=assistant_id,
                    status=RUNNING,
                    usage={},
                    created_at=now,
                )
            )
            await session.flush()
            await self._leases.begin_turn(session, chat_id, turn_id, now, owner=chat.owner)
            await insert_messages(session, chat_id, turn_id, messages, now)

    async def unfinished(self) -> list[TurnRecord]:
        """Turns whose end was never written (the process running them died), oldest first."""
        query = select(TurnRow).where(TurnRow.status == RUNNING).order_by(TurnRow.created_at, TurnRow.id)
        async with self._db.read() as session:
            return [await _turn_record(session, row) for row in await session.scalars(query)]

    async def close_unfinished(self, chat_id: str, turn_id: str, events: Sequence[Event]) -> bool:
        """Append the closing `events` of an unfinished turn and mark it `error`, in one transaction;
        False when the turn is not (or no longer) running.

        Raises:
            EventSequenceError: `events` do not continue the session's log; nothing was written.
        """
        async with self._db.write(ahead=True) as session:
            now = self._db.clock()
            await locked_chat(session, chat_id, now)
            row = await session.get(TurnRow, turn_id)
            if row is None or row.status != RUNNING:
                return False
            await append_events(session, chat_id, events, now)
            row.status = "error"
            await end_turn_lease(session, turn_id)
        return True

    async def persist(self, turn: FinishedTurn) -> TurnRecord:
        """Write the turn (closing its `running` row, if `begin` wrote one): all of it or, on any
        error, none of it.

        Raises:
            RecordNotFound: no such chat.
            RecordExists: the turn (or one of its message ids) was persisted (finished) already.
            EventSequenceError: `turn.events` do not continue the session's log.
        """
        async with self._db.write(ahead=True) as session:  # its stream_end: clients wait for it
            now = self._db.clock()
            chat = await locked_chat(session, turn.chat_id, now)
            row = await session.get(TurnRow, turn.turn_id)
            if row is not None and row.status != RUNNING:
                raise RecordExists("turn", turn.turn_id)
            await append_events(session, turn.chat_id, turn.events, now)
            messages = await insert_messages(session, turn.chat_id, turn.turn_id, turn.messages, now)
            if row is None:
                row = TurnRow(
                    id=turn.turn_id, chat_id=turn.chat_id, assistant_id=turn.assistant_id, created_at=now
                )
                session.add(row)
            row.status = turn.status
            row.usage = turn.usage.model_dump(mode="json")
            if turn.resume:
                chat.resume = merged_keys(chat.resume, turn.resume)
            await end_turn_lease(session, turn.turn_id)
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
