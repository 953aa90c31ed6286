"""Reconcile on start: re-adopt the sandboxes a previous orchestrator left, remove the leftovers.

Only containers carrying `cage.managed=true` *and* a `cage.sandbox` label are considered (runner
images carry `cage.managed` too, and containers made from them by other tools are not ours), plus the
manager's own `extra_labels` (a deployment id, a test run). A box is adopted when its labels parse
and its assistant is known; timeouts are read back from its labels. Oneshot leftovers, half-labelled
boxes and volume-init helpers are removed.

A box whose assistant is unknown is never removed: a missing app mount or a failed listing must not
wipe every box. It is left alone and reported as `unclaimed` (the admin API lists them), and so is
a `persistent` box whatever its labels say. A `cage run` job's box (`cage.run`) is that job's to
remove, so a server on the same engine leaves it alone unless it is a day old (a killed job's).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime

import structlog
from pydantic import BaseModel, ConfigDict

from orchestrator.dsl.sandbox import Lifecycle
from orchestrator.errors import SandboxError, SandboxNotFound
from orchestrator.sandbox.backend import SandboxRef
from orchestrator.sandbox.labels import (
    ASSISTANT,
    HELPER,
    LIFECYCLE,
    MANAGED,
    RUN,
    SANDBOX,
    STALE_RUN_AFTER,
    SandboxLabels,
    session_label,
)
from orchestrator.sandbox.limits import SANDBOX_USER
from orchestrator.sandbox.manager import SandboxManager

log = structlog.get_logger(__name__)

InUseElsewhere = Callable[[Sequence[SandboxRef]], Awaitable[set[str]]]
"""Of these boxes, the names another live replica may be using (its running turn's oneshot box,
its warm pool): reconcile on a shared database never removes those."""


class UnclaimedSandbox(BaseModel):
    """A sandbox reconcile neither adopted nor removed: its assistant is unknown (or could not be
    listed), or it is persistent with labels that do not parse."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    assistant_id: str | None
    lifecycle: str | None
    reason: str


class ReconcileReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    adopted: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unclaimed: tuple[UnclaimedSandbox, ...] = ()


async def reconcile(
    manager: SandboxManager,
    known_assistant: Callable[[str], bool] | None,
    *,
    adopt_only: bool = False,
    in_use_elsewhere: InUseElsewhere | None = None,
) -> ReconcileReport:
    """Adopt or remove every managed sandbox found in the engine. `known_assistant` None means the
    assistants could not be listed: nothing with an assistant is removed then. `adopt_only`: the
    leader's look at boxes other live replicas made (each sweep): adopt what it may reap, never
    remove or report anything (a oneshot box there is another replica's running turn).
    `in_use_elsewhere`: on a shared database, what live replicas use is never removed."""
    found = await manager.backend.find({**manager.extra_labels, MANAGED: "true"})
    foreign = [r for r in found if SANDBOX in r.labels and manager.registry.get(r.name) is None]
    spared = set()
    if in_use_elsewhere is not None and foreign and not adopt_only:
        spared = await in_use_elsewhere(foreign)
    adopted: list[str] = []
    removed: list[str] = []
    unclaimed: list[UnclaimedSandbox] = []
    for ref in found:
        if SANDBOX not in ref.labels and HELPER not in ref.labels:
            continue
        if manager.registry.get(ref.name) is not None:
            continue
        labels = SandboxLabels.parse(ref.labels)
        persistent = ref.labels.get(LIFECYCLE) == Lifecycle.PERSISTENT.value
        known = labels is not None and known_assistant is not None and known_assistant(labels.assistant_id)
        keep = labels is not None and labels.name == ref.name and labels.lifecycle is not Lifecycle.ONESHOT
        if adopt_only and not (labels is not None and keep and known and not persistent):
            continue
        if labels is not None and keep and not known:
            reason = "assistant unknown" if known_assistant is not None else "assistants could not be listed"
            unclaimed.append(
                UnclaimedSandbox(
                    name=ref.name,
                    assistant_id=labels.assistant_id,
                    lifecycle=labels.lifecycle.value,
                    reason=reason,
                )
            )
            continue
        if persistent and not keep:
            unclaimed.append(
                UnclaimedSandbox(
                    name=ref.name,
                    assistant_id=ref.labels.get(ASSISTANT),
                    lifecycle=Lifecycle.PERSISTENT.value,
                    reason="persistent box with labels that do not parse",
                )
            )
            continue
        if labels is not None and keep:
            try:
                info = await manager.backend.inspect(ref.id)
            except SandboxNotFound:
                continue
            age = (datetime.now(UTC) - info.created_at).total_seconds() if info.created_at else 0.0
            manager.adopt(info.ref, labels, age=max(age, 0.0))
            adopted.append(ref.name)
            continue
        if ref.name in spared:  # another live replica's running turn or warm pool
            continue
        if RUN in ref.labels and RUN not in manager.extra_labels and not await _stale_run(manager, ref):
            continue  # a `cage run` job's box on the same engine: that process removes it
        try:
            await manager.backend.remove(ref, force=True)
        except SandboxError as exc:
            log.warning("reconcile could not remove orphan", sandbox=ref.name, error=str(exc))
            continue
        removed.append(ref.name)
    if adopt_only:
        if adopted:
            log.info("sandboxes of other replicas adopted", adopted=len(adopted))
        return ReconcileReport(adopted=tuple(adopted))
    log.info("sandboxes reconciled", adopted=len(adopted), removed=len(removed), unclaimed=len(unclaimed))
    if unclaimed:
        log.warning("sandboxes left unclaimed (see GET /v1/admin/sandboxes/unclaimed)", count=len(unclaimed))
    return ReconcileReport(adopted=tuple(adopted), removed=tuple(removed), unclaimed=tuple(unclaimed))


async def kill_orphaned_turns(manager: SandboxManager, turns: Iterable[tuple[str, str, str]]) -> list[str]:
    """After a crash: kill what the dead process's turns left running in their adopted boxes.

    `turns` are the (owner, assistant id, session id) of the turns start-up recovery closed. The CLI a
    turn ran keeps running in a `session` or `longrunning` box when the orchestrator dies, and the
    next turn would start a second one on the same files; so each such box gets the manager's stray
    sweep (everything but the box's main process and its children) before any turn starts. Returns
    the names of the boxes swept.
    """
    wanted = list(turns)
    swept: list[str] = []
    for box in manager.registry.all():
        if box.busy or box.stopped:
            continue
        session = session_label(box.ref.labels)
        if not any(
            (owner, assistant) == (box.owner, box.assistant_id) and (session is None or session == session_id)
            for owner, assistant, session_id in wanted
        ):
            continue
        await manager.kill_strays(box, user=SANDBOX_USER)  # the manager's own sweep, as at release
        swept.append(box.ref.name)
    if swept:
        log.warning("processes of crashed turns killed in adopted sandboxes", sandboxes=swept)
    return swept


async def _stale_run(manager: SandboxManager, ref: SandboxRef) -> bool:
    """A `cage run` box older than `STALE_RUN_AFTER`: its job was killed before its clean-up."""
    try:
        info = await manager.backend.inspect(ref.id)
    except SandboxNotFound:
        return False
    if info.created_at is None:
        return False
    return (datetime.now(UTC) - info.created_at).total_seconds() > STALE_RUN_AFTER
