"""The audit trail: who did what to which thing, append-only."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pydantic import JsonValue
from sqlalchemy import select

from orchestrator.store.database import Database
from orchestrator.store.records import AuditRecord
from orchestrator.store.tables import AuditRow

_MAX_LIST = 1000


def _record(row: AuditRow) -> AuditRecord:
    return AuditRecord(
        id=row.id, actor=row.actor, action=row.action, target=row.target, detail=row.detail, ts=row.ts
    )


class AuditLog:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(
        self, actor: str, action: str, target: str, detail: Mapping[str, JsonValue] | None = None
    ) -> AuditRecord:
        """Append one entry. `detail` must hold no secrets: callers pass ids and names, not values."""
        row = AuditRow(
            actor=actor, action=action, target=target, detail=dict(detail or {}), ts=self._db.clock()
        )
        async with self._db.write() as tx:
            tx.add(row)
            await tx.flush()
            return _record(row)

    async def list(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        target: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
    ) -> list[AuditRecord]:
        """Entries matching every filter given, newest first."""
        query = select(AuditRow)
        if actor is not None:
            query = query.where(AuditRow.actor == actor)
        if action is not None:
            query = query.where(AuditRow.action == action)
        if target is not None:
            query = query.where(AuditRow.target == target)
        if since is not None:
            query = query.where(AuditRow.ts >= since)
        query = query.order_by(AuditRow.ts.desc(), AuditRow.id.desc()).limit(min(max(limit, 1), _MAX_LIST))
        async with self._db.read() as tx:
            return [_record(row) for row in await tx.scalars(query)]
