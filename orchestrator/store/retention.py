"""Retention: what the store forgets, and when. Without it every event, message and audit entry is
kept forever.

`sweep` deletes, each only when its time-to-live is set:
* sessions idle longer than `session_ttl` (their events, messages and turns go with them), except
  one with a turn still running;
* events older than `event_ttl` (a client replaying from `after_seq` simply starts later);
* audit entries older than `audit_ttl`;
* and always the memory entries that have expired (no read sees them any more), and the
  checkpoints whose turn is gone (its session deleted or expired).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Executable, delete, exists, select, tuple_
from sqlalchemy.orm import aliased

from orchestrator.store.database import Database, affected
from orchestrator.store.tables import AuditRow, CheckpointRow, EventRow, MemoryRow, SessionRow, TurnRow


@dataclass(frozen=True)
class RetentionPolicy:
    session_ttl: timedelta | None = None
    event_ttl: timedelta | None = None
    audit_ttl: timedelta | None = None


class Swept(BaseModel):
    model_config = ConfigDict(frozen=True)
    sessions: int = 0
    events: int = 0
    audit: int = 0
    memory: int = 0
    checkpoints: int = 0


BATCH = 500
"""Rows (or sessions) deleted per transaction: a sweep never holds SQLite's write lock for long,
so turns writing their events in between do not time out on it."""
MAX_BATCHES = 10_000
"""A bound on one sweep (5 million rows of a kind); the rest waits for the next sweep."""


class Retention:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def sweep(self, policy: RetentionPolicy) -> Swept:
        """Apply `policy` now, a batch per transaction; returns how many rows of each kind went."""
        now = self._db.clock()
        counts: dict[str, int] = {}
        if policy.session_ttl is not None:
            session = aliased(SessionRow)  # the subqueries name their own copy: no correlation to the DELETE
            running = exists().where(TurnRow.session_id == session.id, TurnRow.status == "running")
            idle = select(session.id).where(session.updated_at < now - policy.session_ttl, ~running)
            counts["sessions"] = await self._batches(  # events, messages and turns cascade
                lambda: delete(SessionRow).where(SessionRow.id.in_(idle.limit(BATCH).scalar_subquery()))
            )
        if policy.event_ttl is not None:
            cutoff_ms = int((now - policy.event_ttl).timestamp() * 1000)
            event = aliased(EventRow)
            old = select(event.session_id, event.seq).where(event.ts < cutoff_ms).limit(BATCH)
            counts["events"] = await self._batches(
                lambda: delete(EventRow).where(tuple_(EventRow.session_id, EventRow.seq).in_(old))
            )
        if policy.audit_ttl is not None:
            entry = aliased(AuditRow)
            stale = select(entry.id).where(entry.ts < now - policy.audit_ttl).limit(BATCH)
            counts["audit"] = await self._batches(
                lambda: delete(AuditRow).where(AuditRow.id.in_(stale.scalar_subquery()))
            )
        async with self._db.write() as tx:
            result = await tx.execute(delete(MemoryRow).where(MemoryRow.expires_at <= now))
            counts["memory"] = affected(result)
            turns = select(TurnRow.id)
            result = await tx.execute(delete(CheckpointRow).where(CheckpointRow.turn_id.not_in(turns)))
            counts["checkpoints"] = affected(result)
        return Swept(**counts)

    async def _batches(self, statement: Callable[[], Executable]) -> int:
        total = 0
        for _ in range(MAX_BATCHES):
            async with self._db.write() as tx:
                done = affected(await tx.execute(statement()))
            total += done
            if done < BATCH:
                break
        return total
