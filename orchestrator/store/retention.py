"""Retention: what the store forgets, and when. Without it every event, message and audit entry is
kept forever.

`sweep` deletes, each only when its time-to-live is set:
* sessions idle longer than `session_ttl` (their events, messages and turns go with them), except
  one with a turn still running;
* events older than `event_ttl` (a client replaying from `after_seq` simply starts later);
* audit entries older than `audit_ttl`;
* and always the memory entries that have expired (no read sees them any more).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from pydantic import BaseModel, ConfigDict
from sqlalchemy import delete, exists, select

from orchestrator.store.database import Database, affected
from orchestrator.store.tables import AuditRow, ChatRow, EventRow, MemoryRow, TurnRow


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


class Retention:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def sweep(self, policy: RetentionPolicy) -> Swept:
        """Apply `policy` now; returns how many rows of each kind went."""
        now = self._db.clock()
        counts: dict[str, int] = {}
        async with self._db.write() as session:
            if policy.session_ttl is not None:
                running = exists().where(TurnRow.chat_id == ChatRow.id, TurnRow.status == "running")
                idle = select(ChatRow.id).where(ChatRow.updated_at < now - policy.session_ttl, ~running)
                ids = list(await session.scalars(idle))  # events, messages and turns cascade
                result = await session.execute(delete(ChatRow).where(ChatRow.id.in_(ids)))
                counts["sessions"] = affected(result)
            if policy.event_ttl is not None:
                cutoff_ms = int((now - policy.event_ttl).timestamp() * 1000)
                result = await session.execute(delete(EventRow).where(EventRow.ts < cutoff_ms))
                counts["events"] = affected(result)
            if policy.audit_ttl is not None:
                result = await session.execute(delete(AuditRow).where(AuditRow.ts < now - policy.audit_ttl))
                counts["audit"] = affected(result)
            result = await session.execute(delete(MemoryRow).where(MemoryRow.expires_at <= now))
            counts["memory"] = affected(result)
        return Swept(**counts)
