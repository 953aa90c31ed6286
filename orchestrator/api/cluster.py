"""`Cluster`: this `cage serve` among the replicas sharing its database.

Every replica has an identity (`replica_id`, a uuid per process, in `/readyz` and the start-up log)
and a lease in `replicas`, renewed by its heartbeat every `CAGE_REPLICA_HEARTBEAT_SECONDS`; the
turns it runs hold leases that the same heartbeat renews (`orchestrator.store.leases`). At each
heartbeat the replicas also compete for the `maintenance` leader lease: the one holding it runs the
cluster's upkeep (the reaper, the volume and network collectors, retention: `leading()`), reconciles
the engine's sandboxes when it takes the lead (and, each sweep, adopts the boxes other replicas made,
reaping them only when no replica's turn uses them: `fleet`), and closes the turns of replicas whose
lease ran out
(a `kill -9`, a lost host) exactly as start-up recovery closes a crashed process's turns
(`orchestrator_restarted`). When the leader dies, another replica takes the lead within one lease.

SQLite serves one process only: `cage serve` holds an exclusive lock on the database file
(`orchestrator.store.server_lock`) before any of this starts.
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import UTC, datetime
from typing import Any

import structlog

from orchestrator.pipeline.recovery import RecoveredTurn, close_unfinished_turns
from orchestrator.sandbox.backend import SandboxRef
from orchestrator.sandbox.labels import OWNER, SESSION
from orchestrator.sandbox.pool import POOL
from orchestrator.sandbox.reaper import FleetUse
from orchestrator.sandbox.registry import TrackedSandbox
from orchestrator.settings import Settings
from orchestrator.store import Store
from orchestrator.store.leases import MAINTENANCE

log = structlog.get_logger(__name__)

OnLead = Callable[[], Awaitable[None]]
OnRecovered = Callable[[list[RecoveredTurn]], Awaitable[None]]


class Cluster:
    """Heartbeat, leader election and the take-over of dead replicas' turns, for one replica."""

    def __init__(self, store: Store, settings: Settings, *, max_turns_per_owner: int | None = None) -> None:
        """`max_turns_per_owner`: the owner's running-turn cap, counted over every replica when the
        database is shared (each process counts its own as well, `OwnerCaps`)."""
        self.store = store
        self.max_turns_per_owner = max_turns_per_owner
        self.replica_id = store.leases.replica_id
        self.lease_seconds = settings.replica_lease_seconds
        self.heartbeat_seconds = settings.replica_heartbeat_seconds
        self.shared = store.dialect != "sqlite"
        """Several replicas may share the database (Postgres); SQLite has this process alone."""
        self.leader = False
        self.runs: Counter[str] = Counter()
        """Leader-only jobs run by this replica, by name (`cage_maintenance_runs_total{job}`)."""
        self.on_lead: OnLead | None = None
        """Called when this replica takes the lead after start-up (reconcile the engine's sandboxes)."""
        self.on_recovered: OnRecovered | None = None
        """Called with the dead replicas' turns this replica closed (kill what they left running)."""

    async def join(self) -> None:
        """Write this replica's lease; its turns are held by the heartbeat from now on."""
        cap = self.max_turns_per_owner if self.shared else None  # SQLite: this process counts them all
        self.store.leases.bind(lease_seconds=self.lease_seconds, max_turns_per_owner=cap)
        await self.store.leases.join(socket.gethostname(), os.getpid())
        log.info(
            "replica joined",
            replica_id=self.replica_id,
            database=self.store.dialect,
            lease_seconds=self.lease_seconds,
        )

    async def elect(self) -> bool:
        """Take (or keep) the leader lease; True when this replica leads now. Logs every change."""
        was = self.leader
        self.leader = await self.store.leases.claim(MAINTENANCE)
        if self.leader and not was:
            log.info("replica leads the cluster's upkeep", replica_id=self.replica_id)
        elif was and not self.leader:
            log.warning("replica lost the lead", replica_id=self.replica_id)
        return self.leader

    async def startup_orphans(self) -> Collection[str] | None:
        """The unfinished turns start-up recovery closes: on SQLite every one (no other process can
        run them); on a shared database those no live replica holds (None: all of them)."""
        if not self.shared:
            return None
        return await self.store.leases.orphaned(unheld=True)

    async def heartbeat(self) -> None:
        """One beat: renew the leases, elect, and as the leader close dead replicas' turns."""
        if not await self.store.leases.heartbeat():
            log.warning("replica lease had lapsed (the others may have closed its turns); joining again")
            await self.store.leases.join(socket.gethostname(), os.getpid())
        was = self.leader
        if not await self.elect():
            return
        # as at start-up: close the dead replicas' turns, so their boxes are nobody's; then adopt
        # or remove the engine's boxes (a new leader); then stop what those turns left running
        closed = await self.take_over()
        if not was and self.on_lead is not None:
            await self.on_lead()
        if closed and self.on_recovered is not None:
            await self.on_recovered(closed)

    async def take_over(self) -> list[RecoveredTurn]:
        """Close the turns whose replica's lease ran out; returns them."""
        dead = await self.store.leases.orphaned(unheld=False)
        if not dead:
            return []
        closed = await close_unfinished_turns(self.store, dead)
        if closed:
            log.warning(
                "turns of a dead replica closed",
                replica_id=self.replica_id,
                turns=[t.turn_id for t in closed],
            )
        await self.store.leases.forget_dead()
        return closed

    async def fleet(self, boxes: list[TrackedSandbox]) -> dict[str, FleetUse]:
        """The reaper's view of other replicas' use of `boxes`, from their turns in the database: a
        box with a session label is busy while that session (or a sub-agent session under it) runs a turn on
        any replica, any other box while its owner runs one; idle since the session's (owner's) last
        turn began or ended."""
        sessions = {c for b in boxes if (c := b.ref.labels.get(SESSION))}
        seen = await self.store.leases.activity({b.owner for b in boxes}, sessions)
        now = datetime.now(UTC)
        uses: dict[str, FleetUse] = {}
        for box in boxes:
            session = box.ref.labels.get(SESSION)
            if session:
                busy, when = session in seen.busy_sessions, seen.session_active.get(session)
            else:
                busy, when = box.owner in seen.busy_owners, seen.owner_active.get(box.owner)
            idle = None if when is None else max((now - when).total_seconds(), 0.0)
            uses[box.ref.name] = FleetUse(busy=busy, idle_for=idle)
        return uses

    async def in_use_elsewhere(self, refs: Sequence[SandboxRef]) -> set[str]:
        """Of boxes this replica did not make, those another live replica may be using, which a
        start-up or take-over reconcile must leave: a box whose session (else owner) runs a turn on
        any replica (a oneshot box is its turn's), and, while another replica lives, its warm pool
        (an unclaimed pooled box is no turn's; its own replica sweeps it)."""
        if not self.shared or not refs:
            return set()
        others = [r for r in await self.store.leases.live_replicas() if r.id != self.replica_id]
        sessions = {c for r in refs if (c := r.labels.get(SESSION))}
        owners = {o for r in refs if (o := r.labels.get(OWNER))}
        seen = await self.store.leases.activity(owners, sessions)
        spared: set[str] = set()
        for ref in refs:
            session, owner = ref.labels.get(SESSION), ref.labels.get(OWNER)
            pooled = POOL in ref.labels and bool(others)
            busy = session in seen.busy_sessions if session else owner in seen.busy_owners
            if pooled or busy:
                spared.add(ref.name)
        return spared

    def leading(self, job: Callable[[], Awaitable[Any]], *, name: str) -> Callable[[], Awaitable[None]]:
        """`job` run only while this replica leads (the others skip their tick); counted in `runs`."""

        async def step() -> None:
            if not self.leader:
                return
            self.runs[name] += 1
            await job()

        return step

    async def leave(self) -> None:
        """A clean shutdown: remove this replica's lease and give up the lead (its turns ended)."""
        try:
            await self.store.leases.leave()
        except Exception as exc:  # noqa: BLE001 - the lease then simply runs out
            log.warning("replica lease not removed", error=type(exc).__name__)
        self.leader = False
