"""Reconcile on start: re-adopt the sandboxes a previous orchestrator left, remove the orphans.

Only containers carrying `cage.managed=true` *and* a `cage.sandbox` label are considered (runner
images carry `cage.managed` too, and containers made from them by other tools are not ours), plus the
manager's own `extra_labels` (a deployment id, a test run). A box is adopted when its labels parse
and its assistant is known; timeouts are read back from its labels. Everything else (oneshot
leftovers, unknown assistants, half-labelled boxes, volume-init helpers) is removed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import structlog
from pydantic import BaseModel, ConfigDict

from orchestrator.dsl.sandbox import Lifecycle
from orchestrator.errors import SandboxError, SandboxNotFound
from orchestrator.sandbox.labels import HELPER, MANAGED, SANDBOX, SandboxLabels
from orchestrator.sandbox.manager import SandboxManager

log = structlog.get_logger(__name__)


class ReconcileReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    adopted: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


async def reconcile(manager: SandboxManager, known_assistant: Callable[[str], bool]) -> ReconcileReport:
    """Adopt or remove every managed sandbox found in the engine."""
    found = await manager.backend.find({**manager.extra_labels, MANAGED: "true"})
    adopted: list[str] = []
    removed: list[str] = []
    for ref in found:
        if SANDBOX not in ref.labels and HELPER not in ref.labels:
            continue
        if manager.registry.get(ref.name) is not None:
            continue
        labels = SandboxLabels.parse(ref.labels)
        keep = (
            labels is not None
            and labels.name == ref.name
            and labels.lifecycle is not Lifecycle.ONESHOT
            and known_assistant(labels.assistant_id)
        )
        if labels is not None and keep:
            try:
                info = await manager.backend.inspect(ref.id)
            except SandboxNotFound:
                continue
            age = (datetime.now(UTC) - info.created_at).total_seconds() if info.created_at else 0.0
            manager.adopt(info.ref, labels, age=max(age, 0.0))
            adopted.append(ref.name)
            continue
        try:
            await manager.backend.remove(ref, force=True)
        except SandboxError as exc:
            log.warning("reconcile could not remove orphan", sandbox=ref.name, error=str(exc))
            continue
        removed.append(ref.name)
    log.info("sandboxes reconciled", adopted=len(adopted), removed=len(removed))
    return ReconcileReport(adopted=tuple(adopted), removed=tuple(removed))
