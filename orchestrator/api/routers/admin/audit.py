"""Admin: the audit log, newest first."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from orchestrator.api.dependencies import AdminDep, StoreDep
from orchestrator.store import AuditRecord

router = APIRouter(prefix="/v1/admin/audit", tags=["admin"])


@router.get("", response_model=list[AuditRecord])
async def list_audit(
    principal: AdminDep,
    store: StoreDep,
    actor: str | None = None,
    action: str | None = None,
    target: str | None = None,
    since: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[AuditRecord]:
    return await store.audit.list(actor=actor, action=action, target=target, since=since, limit=limit)
