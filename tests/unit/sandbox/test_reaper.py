"""Reaper decisions and sweeps, and reconcile, on the FakeBackend with a fake clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.dsl.sandbox import Lifecycle, SandboxSpec
from orchestrator.sandbox.backend import CreateSpec, SandboxRef
from orchestrator.sandbox.identity import identity_for
from orchestrator.sandbox.labels import (
    LEGACY_SESSION,
    RUN,
    SESSION,
    STALE_RUN_AFTER,
    SandboxLabels,
    sandbox_labels,
    session_label,
)
from orchestrator.sandbox.manager import SandboxManager, SandboxRequest
from orchestrator.sandbox.reaper import ReapAction, Reaper, decide
from orchestrator.sandbox.reconcile import reconcile
from orchestrator.sandbox.registry import TrackedSandbox
from orchestrator.settings import Settings
from tests.unit.sandbox.fakes import FakeBackend, FakeImageBuilder


def tracked(lifecycle: Lifecycle, **kw: Any) -> TrackedSandbox:
    base: dict[str, Any] = {
        "ref": SandboxRef(id="x", name="x"),
        "owner": "o",
        "assistant_id": "a",
        "lifecycle": lifecycle,
        "config_hash": "h",
        "idle_timeout": 10.0,
        "max_lifetime": None,
        "created_at": 0.0,
        "last_used": 0.0,
    }
    base.update(kw)
    return TrackedSandbox(**base)


@pytest.mark.parametrize(
    ("box", "now", "expected"),
    [
        (tracked(Lifecycle.SESSION), 5.0, None),
        (tracked(Lifecycle.SESSION), 11.0, ReapAction.REMOVE),
        (tracked(Lifecycle.SESSION, busy=1), 10_000.0, None),
        (tracked(Lifecycle.LONGRUNNING), 11.0, ReapAction.STOP),
        (tracked(Lifecycle.LONGRUNNING, stopped=True), 11.0, None),
        (tracked(Lifecycle.LONGRUNNING, max_lifetime=100.0, last_used=95.0), 101.0, ReapAction.REMOVE),
        (tracked(Lifecycle.LONGRUNNING, max_lifetime=100.0, busy=2), 500.0, None),
        (tracked(Lifecycle.PERSISTENT, idle_timeout=1.0), 10_000.0, None),
        (tracked(Lifecycle.ONESHOT, idle_timeout=None), 1.0, ReapAction.REMOVE),
    ],
)
def test_decide(box: TrackedSandbox, now: float, expected: ReapAction | None) -> None:
    assert decide(box, now) is expected


def spec(lifecycle: str, **kw: Any) -> SandboxSpec:
    return SandboxSpec.model_validate(
        {"version": "2.0", "runner": {"name": "claude"}, "lifecycle": lifecycle, **kw}
    )


async def test_sweep_removes_idle_session_but_not_a_busy_one(tmp_path: Path) -> None:
    now = [0.0]
    backend = FakeBackend()
    manager = SandboxManager(backend, FakeImageBuilder(), Settings(), clock=lambda: now[0])
    reaper = Reaper(manager, interval=0.2)

    def request(session: str) -> SandboxRequest:
        return SandboxRequest(
            owner="o",
            assistant_id="a",
            assistant_dir=tmp_path,
            session_id=session,
            spec=spec("session", idle_timeout="2s"),
        )

    idle = await manager.acquire(request("idle"))
    busy = await manager.acquire(request("busy"))
    await manager.release(idle)
    now[0] = 100.0
    assert await reaper.sweep() == [(idle.ref.name, ReapAction.REMOVE)]
    assert [b.ref.name for b in backend.boxes.values()] == [busy.ref.name]
    await manager.release(busy)
    now[0] = 101.0
    assert await reaper.sweep() == []
    now[0] = 103.0
    assert await reaper.sweep() == [(busy.ref.name, ReapAction.REMOVE)]
    assert backend.boxes == {}


async def test_sweep_stops_idle_longrunning_and_reuse_restarts_it(tmp_path: Path) -> None:
    now = [0.0]
    backend = FakeBackend()
    manager = SandboxManager(backend, FakeImageBuilder(), Settings(), clock=lambda: now[0])
    req = SandboxRequest(
        owner="o", assistant_id="a", assistant_dir=tmp_path, spec=spec("longrunning", idle_timeout="5s")
    )
    lease = await manager.acquire(req)
    await manager.release(lease)
    now[0] = 6.0
    assert await Reaper(manager).sweep() == [(lease.ref.name, ReapAction.STOP)]
    assert backend.boxes[lease.ref.id].ref.status.value == "stopped"
    again = await manager.acquire(req)
    assert again.ref.id == lease.ref.id and backend.boxes[lease.ref.id].ref.status.value == "running"


async def test_reconcile_adopts_known_and_removes_orphans(tmp_path: Path) -> None:
    backend = FakeBackend()
    extra = {"cage.test-run": "r1"}

    async def make(
        lifecycle: Lifecycle, assistant: str, session: str | None = None, idle: float | None = 7.0
    ) -> SandboxRef:
        ident = identity_for(
            lifecycle, owner="o", assistant_id=assistant, session_id=session, workspace_id=None
        )
        labels = sandbox_labels(
            ident, config_hash="h" * 64, idle_timeout=idle, max_lifetime=None, extra=extra
        )
        return await backend.create(CreateSpec(image="i", name=ident.name, labels=labels))

    kept = await make(Lifecycle.SESSION, "known", session="c")
    gone = await make(Lifecycle.SESSION, "gone", session="c")
    persistent = await make(Lifecycle.PERSISTENT, "gone-too", idle=None)
    await make(Lifecycle.ONESHOT, "known")
    await backend.create(
        CreateSpec(image="i", name="half", labels={**extra, "cage.managed": "true", "cage.sandbox": "half"})
    )
    await backend.create(CreateSpec(image="i", name="not-ours", labels={**extra, "cage.managed": "true"}))
    await backend.create(
        CreateSpec(
            image="i",
            name="other-run",
            labels={"cage.test-run": "r2", "cage.managed": "true", "cage.sandbox": "x"},
        )
    )
    manager = SandboxManager(backend, FakeImageBuilder(), Settings(), extra_labels=extra)
    report = await reconcile(manager, lambda assistant: assistant == "known")
    assert report.adopted == (kept.name,)
    assert sorted(report.removed) == sorted(["half", *[n for n in backend.removed if n.startswith("cage-")]])
    # a box whose assistant is unknown is never removed (a missing app mount must not wipe it)
    assert [(u.name, u.reason) for u in report.unclaimed] == [
        (gone.name, "assistant unknown"),
        (persistent.name, "assistant unknown"),
    ]
    assert {b.ref.name for b in backend.boxes.values()} == {
        kept.name,
        gone.name,
        persistent.name,
        "not-ours",
        "other-run",
    }
    box = manager.registry.get(kept.name)
    assert box is not None and box.idle_timeout == 7.0 and box.lifecycle is Lifecycle.SESSION


async def test_reconcile_leaves_a_cage_run_jobs_box_to_that_job_unless_it_is_a_day_old() -> None:
    """A server and CI jobs on one engine: a `cage run` box is its job's to remove (the job may be
    running right now); one older than `STALE_RUN_AFTER` is a killed job's leftover."""
    backend = FakeBackend()
    extra = {"cage.test-run": "r1"}

    async def make(assistant: str) -> SandboxRef:
        ident = identity_for(
            Lifecycle.ONESHOT, owner="local", assistant_id=assistant, session_id=None, workspace_id=None
        )
        labels = sandbox_labels(
            ident, config_hash="h" * 64, idle_timeout=None, max_lifetime=None, extra={**extra, RUN: "job"}
        )
        return await backend.create(CreateSpec(image="i", name=ident.name, labels=labels))

    running = await make("ci.running")
    killed = await make("ci.killed")
    backend.boxes[running.id].created_at = datetime.now(UTC) - timedelta(minutes=5)
    backend.boxes[killed.id].created_at = datetime.now(UTC) - timedelta(seconds=STALE_RUN_AFTER + 60)
    manager = SandboxManager(backend, FakeImageBuilder(), Settings(), extra_labels=extra)
    report = await reconcile(manager, lambda assistant: True)
    assert report.removed == (killed.name,)
    assert {b.ref.name for b in backend.boxes.values()} == {running.name}


def test_labels_round_trip() -> None:
    ident = identity_for(
        Lifecycle.LONGRUNNING, owner="o", assistant_id="a.b", session_id=None, workspace_id="w"
    )
    labels = sandbox_labels(
        ident, config_hash="f" * 64, idle_timeout=7200.0, max_lifetime=86400.0, extra={"cage.owner": "evil"}
    )
    parsed = SandboxLabels.parse(labels)
    assert parsed is not None
    assert (parsed.name, parsed.owner, parsed.workspace_id, parsed.idle_timeout, parsed.max_lifetime) == (
        ident.name,
        "o",
        "w",
        7200.0,
        86400.0,
    )
    assert SandboxLabels.parse({**labels, "cage.lifecycle": "bogus"}) is None


def test_a_session_box_labelled_before_the_rename_is_read_as_that_session() -> None:
    """Boxes and volumes made before 2026-12 carry `cage.chat`: still parsed (so adopted, matched to
    their session's turns and reaped), while new ones carry only `cage.session`."""
    ident = identity_for(
        Lifecycle.SESSION, owner="o", assistant_id="a.b", session_id="s-1", workspace_id=None
    )
    labels = sandbox_labels(ident, config_hash="f" * 64, idle_timeout=60.0, max_lifetime=None)
    assert labels[SESSION] == "s-1" and LEGACY_SESSION not in labels
    old = {k: v for k, v in labels.items() if k != SESSION} | {LEGACY_SESSION: "s-1"}
    parsed = SandboxLabels.parse(old)
    assert parsed is not None and parsed.session_id == "s-1"
    assert session_label(old) == session_label(labels) == "s-1" and session_label({}) is None


async def test_reconcile_removes_nothing_with_an_assistant_when_the_assistants_could_not_be_listed() -> None:
    backend = FakeBackend()
    extra = {"cage.test-run": "r3"}
    ident = identity_for(
        Lifecycle.LONGRUNNING, owner="o", assistant_id="a.b", session_id=None, workspace_id=None
    )
    labels = sandbox_labels(ident, config_hash="h" * 64, idle_timeout=None, max_lifetime=None, extra=extra)
    box = await backend.create(CreateSpec(image="i", name=ident.name, labels=labels))
    manager = SandboxManager(backend, FakeImageBuilder(), Settings(), extra_labels=extra)
    report = await reconcile(manager, None)
    assert report.removed == () and report.adopted == ()
    assert [(u.name, u.reason) for u in report.unclaimed] == [(box.name, "assistants could not be listed")]
    assert box.id in backend.boxes


async def test_after_a_crash_the_turns_processes_in_an_adopted_box_are_killed(tmp_path: Path) -> None:
    from orchestrator.sandbox.backend import ProcessInfo
    from orchestrator.sandbox.reconcile import kill_orphaned_turns

    backend = FakeBackend()
    extra = {"cage.test-run": "r4"}
    boxes = {}
    for session in ("crashed", "quiet"):
        ident = identity_for(
            Lifecycle.SESSION, owner="o", assistant_id="a.b", session_id=session, workspace_id=None
        )
        labels = sandbox_labels(
            ident, config_hash="h" * 64, idle_timeout=60.0, max_lifetime=None, extra=extra
        )
        ref = await backend.create(CreateSpec(image="i", name=ident.name, labels=labels))
        await backend.start(ref)
        backend.processes[ref.id] = [
            ProcessInfo(pid=1, ppid=0, start=1, argv=("tini",)),
            ProcessInfo(pid=7, ppid=1, start=2, argv=("sleep", "infinity")),  # the box's main process
            ProcessInfo(pid=40, ppid=0, start=50, argv=("claude", "-p")),  # the dead turn's CLI (docker exec)
            ProcessInfo(pid=41, ppid=40, start=51, argv=("bash", "-c", "make test")),
        ]
        boxes[session] = ref
    manager = SandboxManager(backend, FakeImageBuilder(), Settings(), extra_labels=extra)
    report = await reconcile(manager, lambda assistant: assistant == "a.b")
    assert len(report.adopted) == 2

    swept = await kill_orphaned_turns(manager, [("o", "a.b", "crashed")])
    assert swept == [boxes["crashed"].name]
    assert [p.pid for p in backend.processes[boxes["crashed"].id]] == [1, 7]  # no CLI left to run twice
    assert [p.pid for p in backend.processes[boxes["quiet"].id]] == [1, 7, 40, 41]  # other sessions untouched
