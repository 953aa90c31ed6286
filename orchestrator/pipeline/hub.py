"""`SessionHub`: stamps a session's events, appends them to the durable log, fans them out live.

One `SessionEmitter` per session numbers the events; `seq` continues from the log's last event, so a
restarted process (or another one, turn after turn) never reuses a number. Publishing holds the
session's lock from stamping until the live fan-out, so parallel producers of one turn (agent calls
running side by side, a cancelled tool's closing events and the turn's end) cannot append out of
order. The emitter is (re)loaded from the log only under that lock and only when it is missing or
stale: a loader that read `last_seq` outside the lock could rewind an emitter another producer had
moved on meanwhile, and the next batch reused a seq already in the log (the log then refused it
while live clients had got it). A failed write leaves the emitter stale rather than rewinding it by
guess: a write cancelled while it committed may have landed, and only the log knows.

The write is the log's group commit (`EventLog.append`: this process's appends of all sessions share
one transaction), and the fan-out comes only after it has committed: no client is ever told of an
event a crash could still lose, and a batch in flight for one session never holds up another session's.
See docs/architecture.md, "Event path".

`subscribe()` registers its live queue first and then reads the log: an event is either already
in the log when the read happens or arrives through the queue afterwards, and the seq filter drops
what comes twice. A subscriber too slow for its queue is dropped from the fan-out and catches up
from the log again.

Several replicas (Postgres): a session with subscribers here may run its turn in another process. The
hub follows it: every append sends a notice (`<session> <last seq>`) from its transaction, which
Postgres delivers to every process on commit, in commit order (`Store.notices`); a notice past
what this hub has fanned out for the session wakes one catch-up that reads the log from there and
fans the rows out, exactly as a local publish would. Its own publishes are skipped (their seqs are
marked before the write). A reconnected listener and a slow poll (`POLL_S`, one query for every
followed session) catch up what a lost notice missed. On SQLite there is one process and no follower.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from orchestrator.store import Store, StoreError
from orchestrator.store.events import parse_notice
from orchestrator.store.notify import EVENTS_CHANNEL
from orchestrator.stream import Event, SessionEmitter

log = structlog.get_logger(__name__)

Commit = Callable[[list[Event]], Awaitable[None]]
"""Writes stamped events to the log (default: `store.events.append`; the turn's end: `persist_turn`)."""

LIVE_BUFFER = 4096
"""Events a live subscriber may lag behind before it is dropped and re-reads the log."""
_PAGE = 1000
_HALF_MS = 0.0005
"""`ts` is whole milliseconds: an event was stamped, on average, half of one after it."""
POLL_S = 2.0
"""Seconds between two reads of every followed session's `last_seq` (the fallback for lost notices)."""


@dataclass
class _Session:
    emitter: SessionEmitter | None = None
    """None until loaded from the log."""
    stale: bool = False
    """A write failed: reload from the log before stamping again (the emitter, rewound to before
    the failed batch, is only the fallback when the log cannot be read either)."""
    lock: anyio.Lock = field(default_factory=lambda: anyio.Lock(fast_acquire=True))
    """Free in all but a race: taking it gives the event loop no turn (anyio's default does)."""


@dataclass(eq=False)
class _Tail:
    """A session followed for its subscribers here, whichever process writes it."""

    high: int
    """The highest seq fanned out here, or being written by a publish of this process."""
    target: int = 0
    """The highest seq a notice or the poll said the log has."""
    task: asyncio.Task[None] | None = None
    """The catch-up under way (at most one per session, so its fan-outs go in seq order)."""


class SessionHub:
    """Per-session emitters, the durable append, and live subscribers."""

    def __init__(self, store: Store, *, on_delay: Callable[[float], None] | None = None) -> None:
        """`on_delay` is told, as a live subscriber takes an event of a session this hub writes that
        it was waiting for, the seconds since the event's stamp (`LoadGate.observe`): the server's
        delay, not a slow reader's."""
        self._store = store
        self._on_delay = on_delay
        self._sessions: dict[str, _Session] = {}
        self._subscribers: dict[str, set[MemoryObjectSendStream[Event]]] = {}
        self._tails: dict[str, _Tail] = {}
        """Followed sessions (Postgres only): those with a live subscriber here."""
        self._listening = False
        self._poller: asyncio.Task[None] | None = None
        self._jobs: set[asyncio.Task[None]] = set()

    async def begin(self, session_id: str) -> int:
        """Reload the session's emitter from the log (its last seq and ts); returns that last seq.

        Raises:
            RecordNotFound: no such session.
        """
        async with self._locked(session_id) as session:
            return (await self._load(session_id, session)).last_seq

    async def publish(
        self, session_id: str, turn_id: str, events: Sequence[Event], *, commit: Commit | None = None
    ) -> list[Event]:
        """Stamp, write (all or none) and fan out `events`; returns them stamped.

        When the write fails (or is cancelled) the emitter is marked stale: the next batch reloads
        it from the log, so it continues the log whether or not the failed write landed.

        Raises:
            StoreError, EventSequenceError: the write failed; nothing was fanned out.
        """
        if not events:
            return []
        async with self._locked(session_id) as session:
            emitter = await self._current(session_id, session)
            stamped = emitter.stamp_all(events, turn_id=turn_id)
            tail = self._tails.get(session_id)
            if tail is not None:  # our own notice for these must not make the follower read them
                tail.high = max(tail.high, stamped[-1].seq)
            try:
                if commit is None:  # fanned out by the group commit itself, as soon as it commits
                    await self._store.events.append(
                        session_id, stamped, committed=lambda: self.fan_out(session_id, stamped)
                    )
                else:
                    await commit(stamped)
                    self.fan_out(session_id, stamped)
            except BaseException:
                session.emitter = SessionEmitter.resume(
                    session_id, stamped[0].seq - 1, last_ts=emitter.last_ts
                )
                session.stale = True
                if tail is not None:  # if the write landed after all, its notice fans it out
                    tail.high = min(tail.high, stamped[0].seq - 1)
                raise
        return stamped

    @asynccontextmanager
    async def _locked(self, session_id: str) -> AsyncIterator[_Session]:
        """Hold the session's lock; the session is the session's current one (not one evicted while we
        waited for its lock, which a later producer would have replaced with a second lock)."""
        while True:
            session = self._sessions.setdefault(session_id, _Session())
            try:
                async with session.lock:
                    if self._sessions.get(session_id) is session:
                        yield session
                        return
            finally:
                if session.emitter is None and self._sessions.get(session_id) is session:
                    self.evict(session_id)  # never loaded (no such session): keep nothing

    async def _current(self, session_id: str, session: _Session) -> SessionEmitter:
        """The emitter to stamp with (lock held): loaded, or reloaded after a failed write; the
        rewound guess only when the log cannot be read (a store that is down: live-only events)."""
        if session.emitter is not None and not session.stale:
            return session.emitter
        try:
            return await self._load(session_id, session)
        except StoreError:
            if session.emitter is None:
                raise
            log.warning("hub.emitter_not_reloaded", session_id=session_id, next_seq=session.emitter.next_seq)
            return session.emitter

    async def _load(self, session_id: str, session: _Session) -> SessionEmitter:
        """The emitter continuing the log; call with `session.lock` held (no write of ours is under
        way, so the log's last seq is the last one stamped here)."""
        last_seq, last_ts = await self._store.events.tail(session_id)
        session.emitter = SessionEmitter.resume(session_id, last_seq, last_ts=last_ts)
        session.stale = False
        return session.emitter

    def evict(self, session_id: str) -> bool:
        """Forget the session's emitter once nothing uses it (no live subscriber, no publish under
        way): the next `begin` reloads it from the log, so idle sessions hold no memory here."""
        session = self._sessions.get(session_id)
        if session is None or session.lock.locked() or session_id in self._subscribers:
            return False
        if session.lock.statistics().tasks_waiting:
            return False
        del self._sessions[session_id]
        return True

    def tracked(self) -> int:
        """Sessions with an emitter in memory."""
        return len(self._sessions)

    def fan_out(self, session_id: str, stamped: Sequence[Event]) -> None:
        """Hand stamped events to live subscribers (without writing them)."""
        for send in list(self._subscribers.get(session_id, ())):
            try:
                for event in stamped:
                    send.send_nowait(event)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._drop(session_id, send)

    def _drop(self, session_id: str, send: MemoryObjectSendStream[Event]) -> None:
        subs = self._subscribers.get(session_id)
        if subs is not None:
            subs.discard(send)
            if not subs:
                del self._subscribers[session_id]
                self._unfollow(session_id)
                self.evict(session_id)  # the last reader left; a later publish reloads from the log
        send.close()

    def _register(
        self, session_id: str, known: int
    ) -> tuple[MemoryObjectSendStream[Event], MemoryObjectReceiveStream[Event]]:
        send, receive = anyio.create_memory_object_stream[Event](LIVE_BUFFER)
        self._subscribers.setdefault(session_id, set()).add(send)
        self._follow(session_id, known)
        return send, receive

    def _follow(self, session_id: str, known: int) -> None:
        """Follow the session's log for its subscribers here (Postgres), from seq `known` on."""
        if session_id in self._tails or not self._store.notices.enabled:
            return
        self._tails[session_id] = _Tail(high=known)
        if not self._listening:
            self._listening = True
            self._store.notices.listen(EVENTS_CHANNEL, self._noticed, on_connect=self._poll_soon)
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll(), name="cage-hub-poll")

    def _unfollow(self, session_id: str) -> None:
        tail = self._tails.pop(session_id, None)
        if tail is not None and tail.task is not None:
            tail.task.cancel()
        if not self._tails and self._poller is not None:
            self._poller.cancel()
            self._poller = None

    def following(self) -> int:
        """Sessions followed in the log for subscribers here (0 on SQLite)."""
        return len(self._tails)

    def _noticed(self, payload: str) -> None:
        """A notice from the log (any process's commit): fan out what this hub has not."""
        parsed = parse_notice(payload)
        if parsed is None:
            return
        session_id, last_seq = parsed
        tail = self._tails.get(session_id)
        if tail is not None and last_seq > tail.high:
            self._wake(session_id, tail, last_seq)

    def _wake(self, session_id: str, tail: _Tail, last_seq: int) -> None:
        tail.target = max(tail.target, last_seq)
        if tail.task is None:
            tail.task = asyncio.get_running_loop().create_task(
                self._catch_up(session_id, tail), name="cage-hub-catch-up"
            )

    async def _catch_up(self, session_id: str, tail: _Tail) -> None:
        """Read the log past `tail.high` and fan it out, until it reaches `tail.target`."""
        try:
            while tail.target > tail.high and self._tails.get(session_id) is tail:
                page = await self._store.events.after(session_id, tail.high, limit=_PAGE)
                fresh = [event for event in page if event.seq > tail.high]  # a publish here moved it
                if not fresh:
                    return  # the poll tries again
                tail.high = fresh[-1].seq
                self.fan_out(session_id, fresh)
        except StoreError as exc:
            log.warning("hub.follow_failed", session_id=session_id, error=str(exc))
        finally:
            tail.task = None

    def _poll_soon(self) -> None:
        """The listener (re)connected: notices sent while it was away are lost, read the logs."""
        if self._tails:
            job = asyncio.get_running_loop().create_task(self._poll_once(), name="cage-hub-poll-once")
            self._jobs.add(job)
            job.add_done_callback(self._jobs.discard)

    async def _poll(self) -> None:
        while self._tails:
            await asyncio.sleep(POLL_S)
            await self._poll_once()

    async def _poll_once(self) -> None:
        try:
            last = await self._store.events.last_seqs(list(self._tails))
        except StoreError as exc:
            log.warning("hub.poll_failed", error=str(exc))
            return
        for session_id, last_seq in last.items():
            tail = self._tails.get(session_id)
            if tail is not None and last_seq > tail.high:
                self._wake(session_id, tail, last_seq)

    async def subscribe(self, session_id: str, *, after_seq: int = 0) -> AsyncIterator[Event]:
        """Every event with `seq > after_seq`: the log first, then live; no gap, no duplicate.

        Raises:
            RecordNotFound: no such session.
        """
        known = await self._store.events.last_seq(session_id)
        last = after_seq
        while True:
            send, receive = self._register(session_id, max(known, last))
            try:
                async for event in self._replay(session_id, last):
                    last = event.seq
                    yield event
                async with receive:
                    async for event, waited in _drained(receive):
                        if event.seq <= last:
                            continue
                        if event.seq > last + 1:  # a batch fanned out before our log read: fill in
                            async for missed in self._replay(session_id, last, until=event.seq - 1):
                                last = missed.seq
                                yield missed
                        last = event.seq
                        if waited and self._on_delay is not None and session_id in self._sessions:
                            self._on_delay(time.time() - event.ts / 1000 - _HALF_MS)
                        yield event
            finally:
                receive.close()  # also when the reader left during the replay, before `async with`
                self._drop(session_id, send)
            log.info("hub.subscriber_lagged", session_id=session_id, last_seq=last)

    async def _replay(self, session_id: str, after: int, *, until: float = math.inf) -> AsyncIterator[Event]:
        while True:
            page = await self._store.events.after(session_id, after, limit=_PAGE)
            for event in page:
                if event.seq > until:
                    return
                after = event.seq
                yield event
            if len(page) < _PAGE:
                return


async def _drained(receive: MemoryObjectReceiveStream[Event]) -> AsyncIterator[tuple[Event, bool]]:
    """The stream's events, each with whether the reader waited for it: those queued already come
    at once, and the reader waits only when there are none (its own `receive` gives the event loop a
    turn before each one, and a turn is milliseconds on a busy server: the last event of a batch of
    ten would wait ten of them). An event the reader waited for measures the server (its commit and
    the loop); one that was queued already may only have waited for the reader (a slow client)."""
    while True:
        waited = False
        try:
            event = receive.receive_nowait()
        except anyio.WouldBlock:
            try:
                event = await receive.receive()
            except anyio.EndOfStream:
                return
            waited = True
        except anyio.EndOfStream:  # dropped from the fan-out (too slow): the caller reads the log
            return
        yield event, waited
