"""Leases between the replicas sharing one database: who is alive, who runs which turn, who leads.

```python
leases = store.leases                       # replica_id: a fresh uuid per Store (per process)
leases.bind(lease_seconds=30.0)             # `cage serve`: its turns are kept by the heartbeat
await leases.join(host, pid)
await leases.heartbeat()                    # every CAGE_REPLICA_HEARTBEAT_SECONDS
if await leases.claim(MAINTENANCE): ...     # one replica at a time runs the cluster's upkeep
lease = await leases.turn_of_session(session_id)  # where the running turn of a session runs, if any
```

A turn's lease is written with its `running` row (`TurnRepository.begin`) and removed with its end
(`persist`, `close_unfinished`); `session_id` is unique, so two replicas admitting a first message of
one session at once make one turn: the second insert finds the first (the session row is locked) and gets
`TurnRunning`. Lease times come from the store's clock: replicas' clocks must agree to well within
the lease (NTP).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import anyio
from sqlalchemy import bindparam, delete, func, insert, or_, select, text, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from orchestrator.store.database import Database, affected, db_errors, lock_number, transaction_lock
from orchestrator.store.errors import OwnerTurnsRunning, TurnRunning
from orchestrator.store.lease_tables import LeaderLeaseRow, ReplicaRow, TurnLeaseRow
from orchestrator.store.tables import SessionRow, TurnRow, table

LEASE_SECONDS = 30.0
"""Default `CAGE_REPLICA_LEASE_SECONDS`: a replica silent this long is dead to the others."""
MAINTENANCE = "maintenance"
"""The leader lease of the reaper, reconcile, the collectors, retention and dead turns' recovery."""


@dataclass(frozen=True)
class TurnLease:
    """The running turn of a session: which replica runs it, and until when its lease holds
    (None: no heartbeat keeps it, a `cage run` process)."""

    turn_id: str
    session_id: str
    replica_id: str
    expires_at: datetime | None


@dataclass
class Activity:
    """Turns of every replica, for the owners and sessions a reaper asked about (`activity`)."""

    busy_owners: set[str] = field(default_factory=set)
    busy_sessions: set[str] = field(default_factory=set)
    owner_active: dict[str, datetime] = field(default_factory=dict)
    """Owner -> the last time one of its sessions began or ended a turn."""
    session_active: dict[str, datetime] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplicaRecord:
    id: str
    host: str
    pid: int
    started_at: datetime
    expires_at: datetime


_LEASES = table(TurnLeaseRow)
_HELD = select(_LEASES.c.turn_id, _LEASES.c.replica_id).where(_LEASES.c.session_id == bindparam("p_session"))
_NEW_LEASE = insert(_LEASES)
_END_LEASE = delete(_LEASES).where(_LEASES.c.turn_id == bindparam("p_turn"))
_SESSIONS = table(SessionRow)
_OWNER_TURNS = (
    select(func.count())
    .select_from(_LEASES.join(_SESSIONS, _SESSIONS.c.id == _LEASES.c.session_id))
    .where(_SESSIONS.c.owner == bindparam("p_owner"))
)


class LeaseRepository:
    def __init__(self, db: Database) -> None:
        self._db = db
        self.replica_id = uuid.uuid4().hex
        """This process's identity in `replicas`, `turn_leases` and `leader_leases`."""
        self.lease_seconds: float | None = None
        """None until `bind`: turns begun meanwhile get leases no heartbeat renews."""
        self.max_turns_per_owner: int | None = None
        """The owner's cap on running turns over every replica (`bind`); None: not counted here."""

    def bind(self, *, lease_seconds: float, max_turns_per_owner: int | None = None) -> None:
        """From now on this store's turns are held by this replica's heartbeat for `lease_seconds`;
        with `max_turns_per_owner`, a turn begins only while its owner runs fewer, on all replicas."""
        self.lease_seconds = lease_seconds
        self.max_turns_per_owner = max_turns_per_owner

    def _until(self, now: datetime) -> datetime:
        return now + timedelta(seconds=self.lease_seconds or LEASE_SECONDS)

    def expires(self, now: datetime) -> datetime | None:
        """When a turn's lease begun `now` runs out; None before `bind` (no heartbeat keeps it)."""
        return None if self.lease_seconds is None else self._until(now)

    # -- replicas --------------------------------------------------------------------------------

    async def join(self, host: str, pid: int) -> None:
        """Write (or renew) this replica's row."""
        async with self._db.write() as tx:
            now = self._db.clock()
            row = await tx.get(ReplicaRow, self.replica_id)
            if row is None:
                tx.add(
                    ReplicaRow(
                        id=self.replica_id,
                        host=host[:255],
                        pid=pid,
                        started_at=now,
                        expires_at=self._until(now),
                    )
                )
            else:
                row.expires_at = self._until(now)

    async def heartbeat(self) -> bool:
        """Renew this replica's lease and its turns' leases; False when its row was gone (the
        others took it for dead: the caller joins again)."""
        async with self._db.write() as tx:
            now = self._db.clock()
            until = self._until(now)
            found = affected(
                await tx.execute(
                    update(ReplicaRow).where(ReplicaRow.id == self.replica_id).values(expires_at=until)
                )
            )
            await tx.execute(
                update(TurnLeaseRow)
                .where(TurnLeaseRow.replica_id == self.replica_id, TurnLeaseRow.expires_at.is_not(None))
                .values(expires_at=until)
            )
        return found == 1

    async def leave(self) -> None:
        """Remove this replica's row and give up what it leads (a clean shutdown)."""
        async with self._db.write() as tx:
            await tx.execute(delete(LeaderLeaseRow).where(LeaderLeaseRow.replica_id == self.replica_id))
            await tx.execute(delete(ReplicaRow).where(ReplicaRow.id == self.replica_id))

    async def live_replicas(self) -> list[ReplicaRecord]:
        """Replicas whose lease holds, oldest first."""
        query = (
            select(ReplicaRow)
            .where(ReplicaRow.expires_at > self._db.clock())
            .order_by(ReplicaRow.started_at, ReplicaRow.id)
        )
        async with self._db.read() as tx:
            return [
                ReplicaRecord(r.id, r.host, r.pid, r.started_at, r.expires_at)
                for r in await tx.scalars(query)
            ]

    async def forget_dead(self) -> int:
        """Delete the rows of replicas whose lease ran out; returns how many."""
        async with self._db.write() as tx:
            result = await tx.execute(delete(ReplicaRow).where(ReplicaRow.expires_at <= self._db.clock()))
        return affected(result)

    # -- the leader ------------------------------------------------------------------------------

    async def claim(self, name: str) -> bool:
        """Take or renew the leader lease `name`; True when this replica holds it now."""
        try:
            async with self._db.write() as tx:
                now = self._db.clock()
                taken = await tx.execute(
                    update(LeaderLeaseRow)
                    .where(
                        LeaderLeaseRow.name == name,
                        or_(LeaderLeaseRow.replica_id == self.replica_id, LeaderLeaseRow.expires_at <= now),
                    )
                    .values(replica_id=self.replica_id, expires_at=self._until(now))
                )
                if affected(taken):
                    return True
                if await tx.get(LeaderLeaseRow, name) is not None:
                    return False
                tx.add(LeaderLeaseRow(name=name, replica_id=self.replica_id, expires_at=self._until(now)))
        except IntegrityError:  # another replica inserted it first
            return False
        return True

    async def leader(self, name: str) -> str | None:
        """The replica holding `name`, if its lease holds."""
        async with self._db.read() as tx:
            row = await tx.get(LeaderLeaseRow, name)
            return row.replica_id if row is not None and row.expires_at > self._db.clock() else None

    # -- locks across replicas -------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Postgres: a session advisory lock on `key` that every replica's `hold(key)` waits for,
        on a connection of its own until the block ends (a replica that dies drops it with its
        connection). SQLite: nothing to do (one process; its own locks suffice).

        Raises:
            StoreError: the database failed before the lock was taken.
        """
        if self._db.dialect != "postgresql":
            yield
            return
        number = lock_number(key)
        with db_errors():
            conn = await self._db.engine.connect()
        try:
            with db_errors():
                await conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": number})
                await conn.commit()
            yield
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": number})
                    await conn.commit()
                except DBAPIError:  # a broken connection: closing it drops the lock anyway
                    await conn.invalidate()
                await conn.close()

    # -- turns -----------------------------------------------------------------------------------

    async def turn_of_session(self, session_id: str) -> TurnLease | None:
        """The running turn of `session_id` and its replica, if one runs (or ran and was not closed)."""
        async with self._db.read() as tx:
            row = await tx.scalar(select(TurnLeaseRow).where(TurnLeaseRow.session_id == session_id))
            return None if row is None else _lease(row)

    async def orphaned(self, *, unheld: bool) -> set[str]:
        """Ids of `running` turns no live replica holds: their lease ran out, or there is none;
        with `unheld`, also those of leases no heartbeat keeps (`expires_at` None)."""
        now = self._db.clock()
        lapsed = TurnLeaseRow.expires_at <= now
        if unheld:
            lapsed = or_(lapsed, TurnLeaseRow.expires_at.is_(None))
        query = (
            select(TurnRow.id, TurnLeaseRow.turn_id)
            .outerjoin(TurnLeaseRow, TurnLeaseRow.turn_id == TurnRow.id)
            .where(TurnRow.status == "running", or_(TurnLeaseRow.turn_id.is_(None), lapsed))
        )
        async with self._db.read() as tx:
            return {turn_id for turn_id, _ in (await tx.execute(query)).all()}

    async def activity(self, owners: Collection[str], sessions: Collection[str]) -> Activity:
        """What every replica's turns are doing for these owners and sessions: which run a turn now
        (a session counts with its sub-agents' child sessions), and when each was last active (a turn
        began or ended: `sessions.updated_at`), for a reaper that sees other replicas' boxes."""
        result = Activity()
        if not owners and not sessions:
            return result
        session = SessionRow.__table__.alias("session")
        running = (
            select(session.c.owner, session.c.id, session.c.parent_id)
            .select_from(TurnLeaseRow)
            .join(session, session.c.id == TurnLeaseRow.session_id)
            .where(
                or_(
                    session.c.owner.in_(list(owners)),
                    session.c.id.in_(list(sessions)),
                    session.c.parent_id.in_(list(sessions)),
                )
            )
        )
        latest = (
            select(SessionRow.owner, func.max(SessionRow.updated_at))
            .where(SessionRow.owner.in_(list(owners)))
            .group_by(SessionRow.owner)
        )
        touched = select(SessionRow.id, SessionRow.parent_id, SessionRow.updated_at).where(
            or_(SessionRow.id.in_(list(sessions)), SessionRow.parent_id.in_(list(sessions)))
        )
        async with self._db.read() as tx:
            for owner, session_id, parent_id in (await tx.execute(running)).all():
                result.busy_owners.add(owner)
                result.busy_sessions.update(c for c in (session_id, parent_id) if c)
            for owner, when in (await tx.execute(latest)).all():
                if when is not None:
                    result.owner_active[owner] = when
            for session_id, parent_id, when in (await tx.execute(touched)).all():
                for key in (session_id, parent_id):
                    if key and (key not in result.session_active or result.session_active[key] < when):
                        result.session_active[key] = when
        return result

    async def begin_turn(
        self, tx: AsyncSession, session_id: str, turn_id: str, now: datetime, *, owner: str
    ) -> None:
        """Inside `TurnRepository.begin` (the session row locked): lease `session_id`'s turn to this replica.

        Raises:
            TurnRunning: the session has a running turn already (on any replica).
            OwnerTurnsRunning: the owner runs `max_turns_per_owner` turns already (on all replicas).
        """
        held = (await tx.execute(_HELD, {"p_session": session_id})).first()
        if held is not None:
            raise TurnRunning(session_id, held.turn_id, held.replica_id)
        if self.max_turns_per_owner is not None:
            await self._owner_turn_cap(tx, owner, self.max_turns_per_owner)
        expires = self.expires(now)
        lease = {
            "turn_id": turn_id,
            "session_id": session_id,
            "replica_id": self.replica_id,
            "expires_at": expires,
            "created_at": now,
        }
        await tx.execute(_NEW_LEASE, lease)

    async def _owner_turn_cap(self, tx: AsyncSession, owner: str, limit: int) -> None:
        """Count the owner's running turns on every replica. Postgres: under a transaction advisory
        lock on the owner, so two replicas admitting two of its sessions at once count one after the
        other (SQLite's write lock already does that)."""
        await transaction_lock(tx, f"owner:{owner}")
        running = await tx.scalar(_OWNER_TURNS, {"p_owner": owner})
        if (running or 0) >= limit:
            raise OwnerTurnsRunning(owner, limit)


_OWNER_OF = select(_SESSIONS.c.owner).where(_SESSIONS.c.id == bindparam("p_session"))


async def owner_lock(tx: AsyncSession, session_id: str) -> None:
    """Postgres: take the transaction advisory lock of the session's owner (`_owner_turn_cap`'s),
    before the session's row is locked, the order `turn_writer.begin` takes them in (so two begins
    never wait for each other's). SQLite: nothing to do."""
    if tx.get_bind().dialect.name != "postgresql":
        return
    owner = await tx.scalar(_OWNER_OF, {"p_session": session_id})
    if owner is not None:
        await transaction_lock(tx, f"owner:{owner}")


async def end_turn_lease(tx: AsyncSession, turn_id: str) -> None:
    """Inside the transaction that writes a turn's end: its lease goes with it."""
    await tx.execute(_END_LEASE, {"p_turn": turn_id})


def _lease(row: TurnLeaseRow) -> TurnLease:
    return TurnLease(
        turn_id=row.turn_id, session_id=row.session_id, replica_id=row.replica_id, expires_at=row.expires_at
    )
