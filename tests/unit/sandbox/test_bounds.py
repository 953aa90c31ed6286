"""Bounds the manager enforces, on the FakeBackend: acquire time limit, volume cap and GC,
default CPU, stray processes killed when a box goes idle (background prepare steps survive)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.errors import CapacityError, SandboxError
from orchestrator.sandbox.backend import ExecSpec, ProcessInfo, SandboxRef
from orchestrator.sandbox.manager import SandboxManager, SandboxRequest
from orchestrator.sandbox.strays import stray_pids
from orchestrator.sandbox.volumes import VolumeCollector
from orchestrator.settings import Settings
from tests.unit.sandbox.fakes import FakeBackend, FakeImageBuilder, FakeResult

P = ProcessInfo


def spec(**kw: Any) -> SandboxSpec:
    return SandboxSpec.model_validate({"version": "2.0", "runner": {"name": "claude"}, **kw})


def request(tmp_path: Path, sandbox: SandboxSpec, **kw: Any) -> SandboxRequest:
    return SandboxRequest(
        **{"owner": "o", "assistant_id": "a.b", "assistant_dir": tmp_path, "spec": sandbox, **kw}
    )


def test_strays_keep_init_main_survivors_residents_and_their_children() -> None:
    procs = [
        P(pid=1, ppid=0, start=10),
        P(pid=7, ppid=1, start=11, argv=("sh", "-c")),  # main: the oldest child of init
        P(pid=8, ppid=7, start=12, argv=("sleep",)),
        P(pid=20, ppid=1, start=50, argv=("sh", "-c", "trap")),  # an agent's orphan dressed as main
        P(pid=21, ppid=20, start=51),
        P(pid=30, ppid=1, start=60),  # a background prepare step
        P(pid=31, ppid=30, start=61),
        P(pid=40, ppid=1, start=70, exe="/usr/local/bin/opencode", argv=("opencode", "serve")),
        P(pid=41, ppid=40, start=71),
        P(pid=42, ppid=1, start=72, exe="/tmp/opencode", argv=("opencode", "serve")),  # a fake server
        P(pid=50, ppid=0, start=80),  # an exec left running
    ]
    rules = (("/usr/local/bin/opencode", "serve"),)
    assert stray_pids(procs, survivors={(30, 60)}, resident=rules) == [20, 21, 42, 50]
    assert stray_pids(procs, survivors={(30, 99)}) == [20, 21, 30, 31, 40, 41, 42, 50]  # pid reused: no


async def test_acquire_time_limit_releases_the_identity_lock(tmp_path: Path) -> None:
    hangs = [True]

    def script(ref: SandboxRef, exec_spec: ExecSpec) -> FakeResult:
        if exec_spec.argv[-1] == "setup" and hangs[0]:
            hangs[0] = False
            return FakeResult(seconds=60)
        return FakeResult()

    manager = SandboxManager(FakeBackend(script), FakeImageBuilder(), Settings(acquire_timeout=0.5))
    req = request(tmp_path, spec(lifecycle="longrunning", prepare=[{"action": "exec", "cmd": "setup"}]))
    with anyio.fail_after(10):
        with pytest.raises(SandboxError, match=r"not ready within 0.5s"):
            await manager.acquire(req)
        lease = await manager.acquire(req)  # the lock was let go: the next acquire proceeds
    assert manager.registry.get(lease.identity.name) is not None
    assert len(manager.locks) == 0


async def test_default_cpu_limit(tmp_path: Path) -> None:
    backend = FakeBackend()
    manager = SandboxManager(backend, FakeImageBuilder(), Settings(default_cpus=1.5))
    lease = await manager.acquire(request(tmp_path, spec()))
    assert backend.boxes[lease.ref.id].spec.limits.nano_cpus == 1_500_000_000


async def test_volume_cap_per_owner_is_a_capacity_error(tmp_path: Path) -> None:
    backend = FakeBackend()
    manager = SandboxManager(backend, FakeImageBuilder(), Settings(max_workspace_volumes_per_owner=2))
    for ws in ("w1", "w2"):
        await manager.release(await manager.acquire(request(tmp_path, spec(), workspace_id=ws)))
    await manager.release(await manager.acquire(request(tmp_path, spec(), workspace_id="w1")))  # reuse: fine
    with pytest.raises(CapacityError, match="workspace volume limit reached for owner o: at most 2"):
        await manager.acquire(request(tmp_path, spec(), workspace_id="w3"))
    other = await manager.acquire(request(tmp_path, spec(), owner="p", workspace_id="w3"))  # per owner
    assert other.identity.owner == "p"


async def test_volume_gc_removes_only_idle_unused_volumes(tmp_path: Path) -> None:
    now = [0.0]
    backend = FakeBackend()
    manager = SandboxManager(
        backend, FakeImageBuilder(), Settings(workspace_idle_timeout=100), clock=lambda: now[0]
    )
    old = await manager.acquire(request(tmp_path, spec(), workspace_id="old"))
    await manager.release(old)  # oneshot: the box is gone, the volume stays
    held = await manager.acquire(request(tmp_path, spec(lifecycle="longrunning"), workspace_id="held"))
    await manager.release(held)  # the box still mounts it
    now[0] = 50.0
    fresh = await manager.acquire(request(tmp_path, spec(), workspace_id="fresh"))
    await manager.release(fresh)
    backend.volume_labels["legacy-unlabelled"] = {"cage.managed": "true"}
    now[0] = 120.0
    gc = VolumeCollector(manager)
    old_name = next(n for n, labels in backend.volume_labels.items() if labels.get("cage.workspace") == "old")
    assert await gc.collect() == [old_name]
    assert {labels.get("cage.workspace") for labels in backend.volume_labels.values()} == {
        "held",
        "fresh",
        None,
    }
    now[0] = 1000.0
    assert len(await gc.collect()) == 1  # `fresh` now; `held` is mounted, the legacy one is not Cage's
    assert "legacy-unlabelled" in backend.volume_labels


async def test_legacy_volume_is_copied_into_the_new_one_and_kept(tmp_path: Path) -> None:
    backend = FakeBackend()
    backend.volumes["cage-ws-o-default"] = {"notes.txt": b"old"}
    backend.volume_labels["cage-ws-o-default"] = {"cage.managed": "true"}
    manager = SandboxManager(backend, FakeImageBuilder(), Settings())
    lease = await manager.acquire(request(tmp_path, spec()))
    volume = backend.boxes[lease.ref.id].spec.mounts[0].source
    assert backend.copies == [("cage-ws-o-default", volume)]
    assert backend.volumes[volume]["notes.txt"] == b"old" and "cage-ws-o-default" in backend.volumes


async def test_idle_box_loses_its_strays_but_keeps_background_prepare(tmp_path: Path) -> None:
    backend: FakeBackend

    def script(ref: SandboxRef, exec_spec: ExecSpec) -> FakeResult:
        if "nohup" in exec_spec.argv[-1]:
            backend.processes[ref.id] = [P(pid=1, ppid=0, start=1), P(pid=7, ppid=1, start=2)]
            backend.processes[ref.id].append(P(pid=30, ppid=1, start=5))
            return FakeResult(stdout=[b"cage-background 30"])
        return FakeResult()

    backend = FakeBackend(script)
    manager = SandboxManager(backend, FakeImageBuilder(), Settings())
    sandbox = spec(lifecycle="session", prepare=[{"action": "exec", "cmd": "serve", "background": True}])
    lease = await manager.acquire(request(tmp_path, sandbox, session_id="c"))
    backend.processes[lease.ref.id].append(P(pid=44, ppid=1, start=9))  # nohup'd by the agent
    backend.processes[lease.ref.id].append(P(pid=45, ppid=44, start=10))
    await manager.release(lease)
    assert sorted(set(backend.killed)) == [44, 45]
    assert [p.pid for p in backend.processes[lease.ref.id]] == [1, 7, 30]


def test_process_lines_parse_and_bad_lines_are_dropped() -> None:
    from orchestrator.sandbox.docker.backend import _process

    proc = _process(b"12 1 12 345 /usr/local/bin/opencode opencode serve --port 1")
    assert proc == P(
        pid=12,
        ppid=1,
        pgid=12,
        start=345,
        exe="/usr/local/bin/opencode",
        argv=("opencode", "serve", "--port", "1"),
    )
    assert _process(b"13 1 13 346 -") == P(pid=13, ppid=1, pgid=13, start=346)
    assert _process(b"garbage") is None
