"""The per-session event log: durable, gap-free `seq`, replayed to clients after `after_seq`.

The store assigns nothing: `seq` comes from the session's emitter. `append` only accepts events that
continue the log exactly (last seq + 1, + 2, ...) and refuses gaps and duplicates; the chat row's
`last_seq` moves by compare-and-set, so two writers racing on one session cannot both win.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from orchestrator.errors import UsageError
from orchestrator.store.database import Database, affected
from orchestrator.store.errors import EventSequenceError, RecordNotFound
from orchestrator.store.tables import ChatRow, EventRow
from orchestrator.stream import Event, dump_event, parse_event

MAX_READ = 10_000
"""The most events one `after()` call returns; a client catching up pages with the last seq it got."""


async def append_events(
    session: AsyncSession, session_id: str, events: Sequence[Event], now: datetime
) -> int:
    """Append inside the caller's transaction; returns the new last seq.

    Raises:
        RecordNotFound: no chat with this id.
        EventSequenceError: the events do not continue the log.
        UsageError: an event is stamped for another session, or not stamped at all.
    """
    last = await session.scalar(select(ChatRow.last_seq).where(ChatRow.id == session_id))
    if last is None:
        raise RecordNotFound("session", session_id)
    if not events:
        return last
    for offset, ev in enumerate(events, start=1):
        if ev.session_id != session_id:
            raise UsageError(
                f"event seq {ev.seq} is stamped for session {ev.session_id!r}, not {session_id!r}"
            )
        if ev.seq != last + offset:
            raise EventSequenceError(session_id, expected=last + offset, got=ev.seq)
    new_last = last + len(events)
    moved = await session.execute(
        update(ChatRow)
        .where(ChatRow.id == session_id, ChatRow.last_seq == last)
        .values(last_seq=new_last, updated_at=now)
    )
    if affected(moved) != 1:
        # Another writer appended between our read and our update: ours no longer continue the log.
        now_last = await session.scalar(select(ChatRow.last_seq).where(ChatRow.id == session_id))
        raise EventSequenceError(session_id, expected=(now_last or last) + 1, got=events[0].seq)
    session.add_all(
        EventRow(
            session_id=session_id,
            seq=ev.seq,
            turn_id=ev.turn_id,
            type=ev.type,
            payload=dump_event(ev),
            ts=ev.ts,
        )
        for ev in events
    )
    try:
        await session.flush()
    except IntegrityError as err:  # rows past last_seq: the log and the chat row disagree
        raise EventSequenceError(session_id, expected=new_last + 1, got=events[0].seq) from err
    return new_last


class EventLog:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def append(self, session_id: str, events: Sequence[Event]) -> int:
        """Append stamped events in one transaction (all or none); returns the new last seq.

        Raises:
            RecordNotFound: no chat with this id.
            EventSequenceError: a gap or a duplicate; nothing was written.
            UsageError: an event belongs to another session.
        """
        async with self._db.write() as session:
            return await append_events(session, session_id, events, self._db.clock())

    async def after(self, session_id: str, after_seq: int = 0, limit: int = 1000) -> list[Event]:
        """Events with seq > `after_seq`, in seq order, at most `limit` (1 to `MAX_READ`).

        Raises:
            UsageError: `limit` or `after_seq` out of range.
        """
        if not 1 <= limit <= MAX_READ:
            raise UsageError(f"limit must be between 1 and {MAX_READ}, got {limit}")
        if after_seq < 0:
            raise UsageError(f"after_seq must not be negative, got {after_seq}")
        query = (
            select(EventRow.payload)
            .where(EventRow.session_id == session_id, EventRow.seq > after_seq)
            .order_by(EventRow.seq)
            .limit(limit)
        )
        async with self._db.read() as session:
            return [parse_event(payload) for payload in await session.scalars(query)]

    async def of_turn(self, session_id: str, turn_id: str, limit: int = MAX_READ) -> list[Event]:
        """One turn's events, in seq order (at most `limit`)."""
        query = (
            select(EventRow.payload)
            .where(EventRow.session_id == session_id, EventRow.turn_id == turn_id)
            .order_by(EventRow.seq)
            .limit(limit)
        )
        async with self._db.read() as session:
            return [parse_event(payload) for payload in await session.scalars(query)]

    async def last_seq(self, session_id: str) -> int:
        """Seq of the session's last event; 0 for an empty log.

        Raises:
            RecordNotFound: no chat with this id.
        """
        async with self._db.read() as session:
            last = await session.scalar(select(ChatRow.last_seq).where(ChatRow.id == session_id))
        if last is None:
            raise RecordNotFound("session", session_id)
        return last
