"""Turns: a turn's messages, last events, usage and resume state, written in one transaction.

A turn is written twice: `begin` records a `running` row and the user's messages as the turn starts
(so a crash loses neither), `persist` closes it with its answer, last events and usage. A row still
`running` when a new process starts is a turn the old one never finished (`unfinished`); recovery
closes it with `close_unfinished`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from typing import NoReturn

from sqlalchemy import Text, bindparam, cast, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from orchestrator.store import turn_writer
from orchestrator.store.database import Database
from orchestrator.store.errors import EventSequenceError, RecordExists, RecordNotFound, TurnRunning
from orchestrator.store.events import (
    EventLog,
    append_events,
    check_continues,
    check_stamps,
    event_row,
)
from orchestrator.store.leases import LeaseRepository, end_turn_lease, owner_lock
from orchestrator.store.messages import insert_messages, message_record, message_records
from orchestrator.store.notify import EVENTS_CHANNEL
from orchestrator.store.records import FinishedTurn, NewMessage, TurnRecord, TurnSummary
from orchestrator.store.sessions import locked_session, merged_keys
from orchestrator.store.tables import EventRow, MessageRow, SessionRow, TurnRow, table
from orchestrator.stream import Event, Usage

RUNNING = "running"
_SESSIONS = table(SessionRow)
_TURNS = table(TurnRow)

# A turn's begin and end run these for every turn: built once (each is compiled once, and a
# statement built per call cost as much again as running it).
_TOUCH = (
    update(_SESSIONS)
    .where(_SESSIONS.c.id == bindparam("p_session"))
    .values(updated_at=bindparam("p_now"))
    .returning(_SESSIONS.c.owner, _SESSIONS.c.resume)
)
_MOVE = (
    update(_SESSIONS)
    .where(_SESSIONS.c.id == bindparam("p_session"), _SESSIONS.c.last_seq == bindparam("p_old"))
    .values(updated_at=bindparam("p_now"), last_seq=bindparam("p_new"))
)
_MOVED = _MOVE.returning(_SESSIONS.c.owner, _SESSIONS.c.resume)
_MOVED_NOTICE = _MOVE.returning(  # Postgres: the append's notice (`events.notice`), sent on commit
    _SESSIONS.c.owner,
    _SESSIONS.c.resume,
    func.pg_notify(EVENTS_CHANNEL, _SESSIONS.c.id + " " + cast(_SESSIONS.c.last_seq, Text)),
)
_TURN_ID = select(_TURNS.c.id).where(_TURNS.c.id == bindparam("p_turn"))
_NEW_TURN = insert(_TURNS)
_CLOSE = (
    update(_TURNS)
    .where(_TURNS.c.id == bindparam("p_turn"), _TURNS.c.status == RUNNING)
    .values(status=bindparam("p_status"), usage=bindparam("p_usage"))
    .returning(_TURNS.c.assistant_id, _TURNS.c.created_at)
)
_NEW_EVENTS = insert(table(EventRow))
_PREVIOUS = (
    select(_TURNS.c.id, _TURNS.c.assistant_id, _TURNS.c.status)
    .where(_TURNS.c.session_id == bindparam("p_session"), _TURNS.c.id != bindparam("p_turn"))
    .order_by(_TURNS.c.created_at.desc(), _TURNS.c.id.desc())
    .limit(1)
)
_RESUME = (
    update(_SESSIONS).where(_SESSIONS.c.id == bindparam("p_session")).values(resume=bindparam("p_resume"))
)


class TurnRepository:
    def __init__(self, db: Database, leases: LeaseRepository, events: EventLog) -> None:
        self._db = db
        self._leases = leases
        self._events = events
        """A turn's begin and end join its group commit (`EventLog.joined`)."""

    async def begin(
        self,
        session_id: str,
        turn_id: str,
        assistant_id: str,
        messages: Sequence[NewMessage],
        *,
        owner: str | None = None,
    ) -> None:
        """Record a starting turn: a `running` row, its lease (`orchestrator.store.leases`) and the
        user's new messages. `owner`: the session's owner, when the caller knows it (on Postgres a
        begin under an owner's turn cap then takes the owner's lock with its `BEGIN`, one round
        trip fewer; a begin whose session is another owner's is written as without it).

        Raises:
            RecordNotFound: no such session.
            RecordExists: the turn (or one of the message ids) exists already.
            TurnRunning: the session runs a turn already, on this replica or another one.
            OwnerTurnsRunning: the owner runs its cap of turns already, over every replica.
        """
        if self._db.dialect == "postgresql" and await self._begin_postgres(
            session_id, turn_id, assistant_id, messages, owner
        ):
            return
        try:
            await self._events.joined(lambda tx: self._begin(tx, session_id, turn_id, assistant_id, messages))
        except IntegrityError as exc:  # a lease of the session committed between the check and the insert
            held = await self._leases.turn_of_session(session_id)
            if held is None:
                raise
            raise TurnRunning(session_id, held.turn_id, held.replica_id) from exc

    async def _begin_postgres(
        self,
        session_id: str,
        turn_id: str,
        assistant_id: str,
        messages: Sequence[NewMessage],
        owner: str | None,
    ) -> bool:
        """Postgres: the begin in one statement (`turn_writer`); False when it was refused and
        nothing was written (the caller writes it through `_begin`, which says why)."""
        leases, now = self._leases, self._db.clock()
        async with self._db.driver() as conn:
            try:
                await turn_writer.begin(
                    conn,
                    session_id,
                    turn_id,
                    assistant_id,
                    messages,
                    now,
                    replica_id=leases.replica_id,
                    expires_at=leases.expires(now),
                    owner_cap=leases.max_turns_per_owner,
                    owner=owner,
                )
            except turn_writer.Refused:
                return False
        return True

    async def _begin(
        self,
        tx: AsyncSession,
        session_id: str,
        turn_id: str,
        assistant_id: str,
        messages: Sequence[NewMessage],
    ) -> None:
        """The begin's statements, in Core (a handful of statements, no ORM object): the session row
        touched (locked until commit), the turn row, its lease, the user's messages."""
        now = self._db.clock()
        if self._leases.max_turns_per_owner is not None:
            await owner_lock(tx, session_id)  # before the session's row, as `turn_writer.begin`
        session = (await tx.execute(_TOUCH, {"p_session": session_id, "p_now": now})).first()
        if session is None:
            raise RecordNotFound("session", session_id)
        owner = session.owner
        if await tx.scalar(_TURN_ID, {"p_turn": turn_id}) is not None:
            raise RecordExists("turn", turn_id)
        row = {
            "id": turn_id,
            "session_id": session_id,
            "assistant_id": assistant_id,
            "status": RUNNING,
            "usage": {},
            "created_at": now,
        }
        await tx.execute(_NEW_TURN, row)
        await self._leases.begin_turn(tx, session_id, turn_id, now, owner=owner)
        await insert_messages(tx, session_id, turn_id, messages, now)

    async def unfinished(self) -> list[TurnRecord]:
        """Turns whose end was never written (the process running them died), oldest first."""
        query = select(TurnRow).where(TurnRow.status == RUNNING).order_by(TurnRow.created_at, TurnRow.id)
        async with self._db.read() as tx:
            return [await _turn_record(tx, row) for row in await tx.scalars(query)]

    async def close_unfinished(self, session_id: str, turn_id: str, events: Sequence[Event]) -> bool:
        """Append the closing `events` of an unfinished turn and mark it `error`, in one transaction;
        False when the turn is not (or no longer) running.

        Raises:
            EventSequenceError: `events` do not continue the session's log; nothing was written.
        """
        async with self._db.write(ahead=True) as tx:
            now = self._db.clock()
            await locked_session(tx, session_id, now)
            row = await tx.get(TurnRow, turn_id)
            if row is None or row.status != RUNNING:
                return False
            await append_events(tx, session_id, events, now)
            row.status = "error"
            await end_turn_lease(tx, turn_id)
        return True

    async def persist(self, turn: FinishedTurn) -> TurnRecord:
        """Write the turn (closing its `running` row, if `begin` wrote one): all of it or, on any
        error, none of it.

        Raises:
            RecordNotFound: no such session.
            RecordExists: the turn (or one of its message ids) was persisted (finished) already.
            EventSequenceError: `turn.events` do not continue the session's log.
        """
        if self._db.dialect == "postgresql":
            written = await self._persist_postgres(turn)
            if written is not None:
                return written
        # its stream_end: clients wait for it (ahead of the other writers)
        return await self._events.joined(lambda tx: self._persist(tx, turn), ahead=True)

    async def _persist_postgres(self, turn: FinishedTurn) -> TurnRecord | None:
        """Postgres: the end in one statement (`turn_writer`); None when it was refused and nothing
        was written (the caller writes it through `_persist`, which says why or writes a turn
        no `begin` wrote).

        Raises:
            UsageError, EventSequenceError: `turn.events` are not stamped for the session, or do not
                continue each other; nothing was written.
        """
        now = self._db.clock()
        if turn.events:
            check_stamps(turn.session_id, turn.events)
            check_continues(turn.session_id, turn.events[0].seq - 1, turn.events)
        async with self._db.driver() as conn:
            try:
                ended = await turn_writer.end(
                    conn,
                    turn.session_id,
                    turn.turn_id,
                    status=turn.status,
                    usage=turn.usage.model_dump(mode="json"),
                    events=turn.events,
                    messages=turn.messages,
                    resume=turn.resume,
                    now=now,
                )
            except turn_writer.Refused:
                return None
        return TurnRecord(
            id=turn.turn_id,
            session_id=turn.session_id,
            assistant_id=ended.assistant_id,
            status=turn.status,
            usage=turn.usage,
            created_at=ended.created_at.astimezone(UTC),
            messages=tuple(
                message_records(turn.session_id, turn.turn_id, turn.messages, now, ended.last_sequence)
            ),
        )

    async def _persist(self, tx: AsyncSession, turn: FinishedTurn) -> TurnRecord:
        """The end's statements, in Core: the session row touched and, when the end carries events,
        its log moved by compare-and-set from the seq before them (one statement, which also sends
        the Postgres notice); the turn row closed; the events, the messages; the lease dropped."""
        now = self._db.clock()
        session_id, events = turn.session_id, turn.events
        if events:
            check_stamps(session_id, events)
            check_continues(session_id, events[0].seq - 1, events)
            move = _MOVED_NOTICE if self._db.dialect == "postgresql" else _MOVED
            params = {
                "p_session": session_id,
                "p_now": now,
                "p_old": events[0].seq - 1,
                "p_new": events[-1].seq,
            }
            session = (await tx.execute(move, params)).first()
        else:
            session = (await tx.execute(_TOUCH, {"p_session": session_id, "p_now": now})).first()
        if session is None:
            await self._refused(tx, turn)
        usage = turn.usage.model_dump(mode="json")
        closed = (
            await tx.execute(_CLOSE, {"p_turn": turn.turn_id, "p_status": turn.status, "p_usage": usage})
        ).first()
        if closed is None:  # no `begin` wrote it (a turn persisted whole, `cage run`'s tests)
            if await tx.scalar(_TURN_ID, {"p_turn": turn.turn_id}) is not None:
                raise RecordExists("turn", turn.turn_id)
            row = {
                "id": turn.turn_id,
                "session_id": session_id,
                "assistant_id": turn.assistant_id,
                "status": turn.status,
                "usage": usage,
                "created_at": now,
            }
            await tx.execute(_NEW_TURN, row)
            assistant_id, created_at = turn.assistant_id, now
        else:
            assistant_id, created_at = closed.assistant_id, closed.created_at
        if events:
            try:
                await tx.execute(_NEW_EVENTS, [event_row(session_id, ev) for ev in events])
            except IntegrityError as err:  # rows past last_seq: the log and the session row disagree
                raise EventSequenceError(session_id, expected=events[-1].seq + 1, got=events[0].seq) from err
        messages = await insert_messages(tx, session_id, turn.turn_id, turn.messages, now)
        if turn.resume:
            resume = merged_keys(session.resume, turn.resume)
            await tx.execute(_RESUME, {"p_session": session_id, "p_resume": resume})
        await end_turn_lease(tx, turn.turn_id)
        return TurnRecord(
            id=turn.turn_id,
            session_id=session_id,
            assistant_id=assistant_id,
            status=turn.status,
            usage=turn.usage,
            created_at=created_at,
            messages=tuple(messages),
        )

    async def _refused(self, tx: AsyncSession, turn: FinishedTurn) -> NoReturn:
        """Why the session's row did not take the turn's end: no such session, the turn ended already,
        or (its compare-and-set lost) events that do not continue the log.

        Raises: RecordNotFound, RecordExists, EventSequenceError.
        """
        last = await tx.scalar(select(_SESSIONS.c.last_seq).where(_SESSIONS.c.id == turn.session_id))
        if last is None:
            raise RecordNotFound("session", turn.session_id)
        status = await tx.scalar(select(_TURNS.c.status).where(_TURNS.c.id == turn.turn_id))
        if status is not None and status != RUNNING:
            raise RecordExists("turn", turn.turn_id)
        raise EventSequenceError(turn.session_id, expected=last + 1, got=turn.events[0].seq)

    async def previous(self, session_id: str, turn_id: str) -> TurnSummary | None:
        """The session's last turn other than `turn_id` (the one running), without its messages;
        None when there is none."""
        async with self._db.query() as conn:
            row = (await conn.execute(_PREVIOUS, {"p_session": session_id, "p_turn": turn_id})).first()
        if row is None:
            return None
        return TurnSummary(id=row.id, assistant_id=row.assistant_id, status=row.status)

    async def get(self, turn_id: str) -> TurnRecord | None:
        async with self._db.read() as tx:
            row = await tx.get(TurnRow, turn_id)
            return None if row is None else await _turn_record(tx, row)

    async def of_session(self, session_id: str) -> list[TurnRecord]:
        """The session's turns, oldest first."""
        query = (
            select(TurnRow).where(TurnRow.session_id == session_id).order_by(TurnRow.created_at, TurnRow.id)
        )
        async with self._db.read() as tx:
            return [await _turn_record(tx, row) for row in await tx.scalars(query)]

    async def usage(self, session_id: str) -> Usage:
        """The session's cumulative usage: its turns' usages summed."""
        query = select(TurnRow.usage).where(TurnRow.session_id == session_id)
        total = Usage(scope="cumulative")
        async with self._db.read() as tx:
            for data in await tx.scalars(query):
                total = total + Usage.model_validate(data)
        return total


async def _turn_record(tx: AsyncSession, row: TurnRow) -> TurnRecord:
    query = select(MessageRow).where(MessageRow.turn_id == row.id).order_by(MessageRow.sequence)
    messages = tuple(message_record(m) for m in await tx.scalars(query))
    return TurnRecord(
        id=row.id,
        session_id=row.session_id,
        assistant_id=row.assistant_id,
        status=row.status,
        usage=Usage.model_validate(row.usage),
        created_at=row.created_at,
        messages=messages,
    )
