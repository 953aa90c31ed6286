"""The per-session event log: durable, gap-free `seq`, replayed to clients after `after_seq`.

The store assigns nothing: `seq` comes from the session's emitter. `append` only accepts events that
continue the log exactly (last seq + 1, + 2, ...) and refuses gaps and duplicates; the session row's
`last_seq` moves by compare-and-set, so two writers racing on one session cannot both win.

Group commit: the appends of one process are queued and written together, one transaction for all
the sessions that have events waiting (at most `MAX_BATCH_EVENTS`), so a busy server pays one
commit per batch instead of one per event; the transaction is one round trip to the database
(`orchestrator.store.log_writer`), on a connection the flush keeps for its batches. On SQLite the
batch goes ahead of the process's other waiting writers (`Database.writer_turn(ahead=True)`): live
clients wait for it. There is no timer: the first append starts a flush at once, and whatever
arrives while a transaction is in flight goes into the next one. Each append still returns only
once its own events are committed (or raises), and its `committed` callback (the hub's fan-out)
runs as soon as they are. The outcome is per append: a gap or a duplicate in one session's events
fails that append alone (the batch is then written again one append per transaction, each with
its exact error). Durable order is seq order: one session's appends are written in the order they
were queued, each checked against the log.

On Postgres every transaction that moves a session's log also sends `<session id> <last seq>` on
`EVENTS_CHANNEL` (`orchestrator.store.notify`); Postgres delivers it on commit, in commit order, so
another replica following the session (`SessionHub`) is woken only when the rows are there to read.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import structlog
from sqlalchemy import Integer, Text, bindparam, cast, insert, select, update
from sqlalchemy import exc as sa_exc
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from orchestrator.errors import UsageError
from orchestrator.store import log_writer
from orchestrator.store.database import WRITE_OPTION, Database, affected, db_errors
from orchestrator.store.errors import EventSequenceError, RecordNotFound, StoreError
from orchestrator.store.notify import EVENTS_CHANNEL, notify
from orchestrator.store.tables import EventRow, SessionRow
from orchestrator.stream import Event, dump_event, parse_event

log = structlog.get_logger(__name__)
T = TypeVar("T")

MAX_READ = 10_000
"""The most events one `after()` call returns; a client catching up pages with the last seq it got."""


async def append_events(tx: AsyncSession, session_id: str, events: Sequence[Event], now: datetime) -> int:
    """Append inside the caller's transaction; returns the new last seq.

    Raises:
        RecordNotFound: no session with this id.
        EventSequenceError: the events do not continue the log.
        UsageError: an event is stamped for another session, or not stamped at all.
    """
    last = await tx.scalar(select(SessionRow.last_seq).where(SessionRow.id == session_id))
    if last is None:
        raise RecordNotFound("session", session_id)
    if not events:
        return last
    check_stamps(session_id, events)
    check_continues(session_id, last, events)
    new_last = last + len(events)
    moved = await tx.execute(
        update(SessionRow)
        .where(SessionRow.id == session_id, SessionRow.last_seq == last)
        .values(last_seq=new_last, updated_at=now)
    )
    if affected(moved) != 1:
        # Another writer appended between our read and our update: ours no longer continue the log.
        now_last = await tx.scalar(select(SessionRow.last_seq).where(SessionRow.id == session_id))
        raise EventSequenceError(session_id, expected=(now_last or last) + 1, got=events[0].seq)
    try:
        await tx.execute(insert(EventRow), [event_row(session_id, ev) for ev in events])
    except IntegrityError as err:  # rows past last_seq: the log and the session row disagree
        raise EventSequenceError(session_id, expected=new_last + 1, got=events[0].seq) from err
    await notify(tx, EVENTS_CHANNEL, [notice(session_id, new_last)])
    return new_last


def notice(session_id: str, last_seq: int) -> str:
    """The `EVENTS_CHANNEL` payload telling followers the session's log now reaches `last_seq`."""
    return f"{session_id} {last_seq}"


def parse_notice(payload: str) -> tuple[str, int] | None:
    """The session id and last seq of an `EVENTS_CHANNEL` payload; None for anything else."""
    session_id, _, seq = payload.rpartition(" ")
    return (session_id, int(seq)) if session_id and seq.isdigit() else None


def check_stamps(session_id: str, events: Sequence[Event]) -> None:
    """Raises UsageError when an event is stamped for another session."""
    for ev in events:
        if ev.session_id != session_id:
            raise UsageError(
                f"event seq {ev.seq} is stamped for session {ev.session_id!r}, not {session_id!r}"
            )


def check_continues(session_id: str, last: int, events: Sequence[Event]) -> None:
    """Raises EventSequenceError unless `events` are seq `last` + 1, + 2, ..."""
    for offset, ev in enumerate(events, start=1):
        if ev.seq != last + offset:
            raise EventSequenceError(session_id, expected=last + offset, got=ev.seq)


def event_row(session_id: str, ev: Event) -> dict[str, object]:
    """An event's row of the `events` table (its payload as JSON data)."""
    return {
        "session_id": session_id,
        "seq": ev.seq,
        "turn_id": ev.turn_id,
        "type": ev.type,
        "payload": dump_event(ev),
        "ts": ev.ts,
    }


_PAYLOAD = cast(EventRow.payload, Text)
"""An event's stored JSON as text: parsed once, by the event model itself."""

# The reads of every turn and every catch-up, built once (a statement built per call cost a third
# of the read).
_AFTER = (
    select(_PAYLOAD)
    .where(EventRow.session_id == bindparam("p_session"), EventRow.seq > bindparam("p_after"))
    .order_by(EventRow.seq)
    .limit(bindparam("p_limit", type_=Integer))
)
_TAIL = (
    select(SessionRow.last_seq, EventRow.ts)
    .outerjoin(EventRow, (EventRow.session_id == SessionRow.id) & (EventRow.seq == SessionRow.last_seq))
    .where(SessionRow.id == bindparam("p_session"))
)
_LAST_SEQ = select(SessionRow.last_seq).where(SessionRow.id == bindparam("p_session"))

MAX_BATCH_EVENTS = 2000
"""The most events one group commit writes (an append larger than this is written on its own)."""

Committed = Callable[[], None]
"""Called by the group commit as soon as an append's transaction has committed (before the
appending task resumes): the hub fans the events out from there."""


Job = Callable[[AsyncSession], Awaitable[T]]
"""Work for a write transaction (`EventLog.joined`): runs its statements on the session it is given."""


@dataclass(eq=False)
class _Append:
    session_id: str
    events: list[Event]
    """An append's events; none for a job."""
    done: asyncio.Future[Any]
    committed: Committed | None = None
    job: Job[Any] | None = None
    """A job joining the group commit (SQLite), written in queue order with the appends."""
    taken: bool = False
    """In a transaction under way: a cancelled caller waits for its outcome."""


@dataclass
class _Queue:
    waiting: list[_Append] = field(default_factory=list)
    flusher: asyncio.Task[None] | None = None


class EventLog:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._queue = _Queue()
        self.batches = 0
        """Group commits written so far (each one transaction), for tests and metrics."""

    async def append(
        self, session_id: str, events: Sequence[Event], *, committed: Committed | None = None
    ) -> int:
        """Append stamped events (all or none), with other appends of this process in one
        transaction; returns the new last seq once they are committed. `committed` is called
        once they are, from the group commit itself, before this returns.

        A caller cancelled while its events are in a transaction waits for that transaction to
        end before the cancel goes on, so when `append` returns or raises, the log is settled:
        the events are either in it or never will be.

        Raises:
            RecordNotFound: no session with this id.
            EventSequenceError: a gap or a duplicate; nothing was written.
            UsageError: an event belongs to another session.
            StoreError: the database failed; the events may or may not have landed (read the log).
        """
        check_stamps(session_id, events)
        if not events:
            return await self.last_seq(session_id)
        last: int = await self._queued(session_id, list(events), committed, None)
        return last

    async def joined(self, job: Job[T], *, ahead: bool = False) -> T:
        """`job(session)` in a write transaction, committed before this returns its result.

        On SQLite the job joins the group commit: it runs in the next batch's transaction, in
        queue order with the appends, so a turn's begin and end share one commit (one `fsync`,
        one turn of the writers) with whatever else is queued; when a job fails, the batch is
        undone and written again one item at a time, so the failure is that job's alone. Postgres
        writers run side by side, so there the job gets a transaction of its own
        (`Database.write(ahead=ahead)`). Cancelled, it settles as `append` does.

        Raises: whatever `job` raises (nothing of it was written); StoreError.
        """
        if self._db.dialect != "sqlite":
            async with self._db.write(ahead=ahead) as tx:
                return await job(tx)
        result: T = await self._queued("", [], None, job)
        return result

    async def _queued(
        self, session_id: str, events: list[Event], committed: Committed | None, job: Job[Any] | None
    ) -> Any:
        loop = asyncio.get_running_loop()
        pending = _Append(session_id, events, loop.create_future(), committed, job)
        queue = self._queue
        queue.waiting.append(pending)
        if queue.flusher is None or queue.flusher.done():
            queue.flusher = loop.create_task(self._flush(queue), name="cage-event-log-flush")
        try:
            return await asyncio.shield(pending.done)
        except asyncio.CancelledError:
            if not pending.taken:
                queue.waiting.remove(pending)  # never written, and never will be
                raise
            await asyncio.wait([pending.done])  # in a transaction: let it settle (one flush)
            raise

    async def drain(self) -> None:
        """Wait until every queued append is written (the store closes after this)."""
        flusher = self._queue.flusher
        if flusher is not None and not flusher.done():
            await asyncio.wait([flusher])

    async def _flush(self, queue: _Queue) -> None:
        """Write what is queued, batch after batch, on one connection kept for the run. Closing
        that connection may wait (Postgres), and an append queued meanwhile starts no flush of its
        own (this one is not done yet): the run goes on until the queue is empty after a close."""
        while queue.waiting:
            writer = _Writer(self._db)
            try:
                while queue.waiting:
                    await self._flush_one(queue, writer)
            finally:
                await writer.close()

    async def _flush_one(self, queue: _Queue, writer: _Writer) -> None:
        batch = _take(queue.waiting)
        for item in batch:
            item.taken = True
        try:
            outcomes = await self._write(writer, batch)
        except BaseException:  # the loop is closing: no waiter is left waiting
            for item in (*batch, *queue.waiting):
                item.done.cancel()
            queue.waiting.clear()
            raise
        for item, outcome in zip(batch, outcomes, strict=True):
            if item.committed is not None and not isinstance(outcome, BaseException):
                _call(item.committed)
            _settle(item, outcome)

    async def _write(self, writer: _Writer, batch: list[_Append]) -> list[Any]:
        """The batch in one transaction when its appends continue each other; else (or when
        the log says otherwise) one transaction per append or job, each with its own outcome."""
        if any(item.job is not None for item in batch):
            try:
                outcomes = await writer.write_with_jobs(batch)
            except (log_writer.LogMoved, _JobFailed):
                pass
            except Exception as exc:  # noqa: BLE001 - every waiter gets the failure as its own
                return [exc] * len(batch)
            else:
                self.batches += 1
                return outcomes
            return [await self._write_alone(item) for item in batch]
        planned = log_writer.plan([(item.session_id, item.events) for item in batch])
        if planned is not None:
            try:
                await writer.write(planned)
            except log_writer.LogMoved:
                pass
            except Exception as exc:  # noqa: BLE001 - every waiter gets the failure as its own
                return [exc] * len(batch)
            else:
                self.batches += 1
                return [item.events[-1].seq for item in batch]
        return [await self._write_alone(item) for item in batch]

    async def _write_alone(self, item: _Append) -> Any:
        try:
            async with self._db.write(ahead=True) as tx:
                if item.job is not None:
                    outcome = await item.job(tx)
                else:
                    outcome = await append_events(tx, item.session_id, item.events, self._db.clock())
        except Exception as exc:  # noqa: BLE001 - the append's own outcome
            return exc
        self.batches += 1
        return outcome

    async def after(self, session_id: str, after_seq: int = 0, limit: int = 1000) -> list[Event]:
        """Events with seq > `after_seq`, in seq order, at most `limit` (1 to `MAX_READ`).

        Raises:
            UsageError: `limit` or `after_seq` out of range.
        """
        if not 1 <= limit <= MAX_READ:
            raise UsageError(f"limit must be between 1 and {MAX_READ}, got {limit}")
        if after_seq < 0:
            raise UsageError(f"after_seq must not be negative, got {after_seq}")
        params = {"p_session": session_id, "p_after": after_seq, "p_limit": limit}
        async with self._db.query() as conn:
            return [parse_event(payload) for payload in await conn.scalars(_AFTER, params)]

    async def of_turn(self, session_id: str, turn_id: str, limit: int = MAX_READ) -> list[Event]:
        """One turn's events, in seq order (at most `limit`)."""
        query = (
            select(_PAYLOAD)
            .where(EventRow.session_id == session_id, EventRow.turn_id == turn_id)
            .order_by(EventRow.seq)
            .limit(limit)
        )
        async with self._db.read() as tx:
            return [parse_event(payload) for payload in await tx.scalars(query)]

    async def last_seqs(self, session_ids: Sequence[str]) -> dict[str, int]:
        """The last seq of each session that exists, in one query (a follower's slow poll)."""
        if not session_ids:
            return {}
        query = select(SessionRow.id, SessionRow.last_seq).where(SessionRow.id.in_(sorted(set(session_ids))))
        async with self._db.read() as tx:
            return {session_id: last for session_id, last in await tx.execute(query)}

    async def tail(self, session_id: str) -> tuple[int, int]:
        """The seq and `ts` of the session's last event, in one query; (0, 0) for an empty log.

        Raises:
            RecordNotFound: no session with this id.
        """
        async with self._db.query() as conn:
            row = (await conn.execute(_TAIL, {"p_session": session_id})).first()
        if row is None:
            raise RecordNotFound("session", session_id)
        return row.last_seq, row.ts or 0

    async def last_seq(self, session_id: str) -> int:
        """Seq of the session's last event; 0 for an empty log.

        Raises:
            RecordNotFound: no session with this id.
        """
        async with self._db.query() as conn:
            last = await conn.scalar(_LAST_SEQ, {"p_session": session_id})
        if last is None:
            raise RecordNotFound("session", session_id)
        return last


def _take(waiting: list[_Append]) -> list[_Append]:
    """The next batch, in queue order: at least one append, then as many as fit (a job counts
    as one event)."""
    batch = [waiting.pop(0)]
    count = len(batch[0].events) or 1
    while waiting and count + (len(waiting[0].events) or 1) <= MAX_BATCH_EVENTS:
        count += len(waiting[0].events) or 1
        batch.append(waiting.pop(0))
    return batch


def _settle(item: _Append, outcome: object) -> None:
    if item.done.done():
        return
    if isinstance(outcome, BaseException):
        item.done.set_exception(outcome)
    else:
        item.done.set_result(outcome)


def _call(committed: Committed) -> None:
    try:
        committed()
    except Exception as exc:  # a fan-out never fails the write it follows
        log.error("event_log.committed_callback_failed", error=type(exc).__name__, exc_info=exc)


class _Writer:
    """The group commit's connection: checked out for the first batch of a flush, kept for the
    batches after it (no pool round trip, no Postgres ping each), dropped after a failure."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._conn: AsyncConnection | None = None

    async def write(self, batch: log_writer.Batch) -> None:
        """Raises: log_writer.LogMoved (nothing written), StoreError (the database failed)."""
        with db_errors():
            async with self._db.writer_turn(ahead=True):
                conn = await self._connection()
                try:
                    await log_writer.write(conn, batch, self._db.clock())
                except log_writer.LogMoved:
                    raise
                except Exception as exc:
                    await self._drop()
                    reason = f"{type(exc).__name__}: {_first_line(exc)}"
                    raise StoreError(f"database unavailable ({reason})") from exc

    async def write_with_jobs(self, batch: list[_Append]) -> list[Any]:
        """SQLite: one transaction for the batch's appends and jobs, in queue order (each run of
        appends one compare-and-set and one insert, the jobs on one session). Its
        statements run on the loop's thread, where they wait for nothing (`sqlite_driver`), and
        its commit is the one hop.

        Raises: log_writer.LogMoved, _JobFailed (nothing written), StoreError (the database failed).
        """
        now = self._db.clock()
        with db_errors():
            async with self._db.writer_turn(ahead=True):
                conn = await self._connection()
                try:
                    async with conn.begin():
                        return await _in_order(conn, batch, now)
                except (log_writer.LogMoved, _JobFailed, sa_exc.DBAPIError, StoreError):
                    raise
                except Exception as exc:
                    await self._drop()
                    reason = f"{type(exc).__name__}: {_first_line(exc)}"
                    raise StoreError(f"database unavailable ({reason})") from exc

    async def _connection(self) -> AsyncConnection:
        if self._conn is None:
            conn = await self._db.engine.connect()
            self._conn = await conn.execution_options(**{WRITE_OPTION: True})
        return self._conn

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.invalidate()
            with contextlib.suppress(Exception):
                await conn.close()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:200] if text else ""


_FATAL = (sa_exc.OperationalError, sa_exc.InterfaceError, OSError)
"""Failures of the database, not of one job: the whole batch fails with them."""


class _JobFailed(Exception):
    """A job of a batch raised: the batch is undone, and written again one item at a time (so
    only that job fails, with its own error). Jobs rarely fail (a turn begun twice); savepoints
    that would isolate them cost two statements each in every batch."""


async def _in_order(conn: AsyncConnection, batch: list[_Append], now: datetime) -> list[Any]:
    """The batch's appends and jobs on `conn`, in its open transaction, in queue order.

    Raises: log_writer.LogMoved, _JobFailed (the caller rolls back)."""
    outcomes: list[Any] = []
    run: list[_Append] = []

    async def appends() -> None:
        if run:
            planned = log_writer.plan([(item.session_id, item.events) for item in run])
            if planned is None:
                raise log_writer.LogMoved
            await log_writer.write_in(conn, planned, now)
            outcomes.extend(item.events[-1].seq for item in run)
            run.clear()

    tx = AsyncSession(bind=conn, expire_on_commit=False)  # joins the batch's transaction
    try:
        for item in batch:
            if item.job is None:
                run.append(item)
                continue
            await appends()
            try:
                outcomes.append(await item.job(tx))
            except _FATAL:
                raise
            except Exception as exc:
                raise _JobFailed from exc
        await appends()
    finally:
        await tx.close()
    return outcomes
