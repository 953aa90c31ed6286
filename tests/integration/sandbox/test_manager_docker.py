"""SandboxManager on a real Docker engine: the lifecycle acceptance cases."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio
import docker
import pytest

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.errors import WorkspaceError
from orchestrator.sandbox.backend import ExecSpec
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.manager import SandboxLease, SandboxManager, SandboxRequest
from orchestrator.sandbox.reaper import Reaper
from orchestrator.sandbox.reconcile import reconcile
from orchestrator.settings import Settings
from tests.unit.sandbox.fakes import FakeImageBuilder


def spec(**kw: Any) -> SandboxSpec:
    return SandboxSpec.model_validate({"version": "2.0", "runner": {"name": "claude"}, **kw})


def request(tmp_path: Path, sandbox: SandboxSpec, **kw: Any) -> SandboxRequest:
    owner = kw.pop("owner", f"o{uuid.uuid4().hex[:8]}")
    return SandboxRequest(owner=owner, assistant_id="tests.echo", assistant_dir=tmp_path, spec=sandbox, **kw)


async def sh(manager: SandboxManager, lease: SandboxLease, script: str) -> tuple[list[bytes], int]:
    async with await manager.exec(lease, ExecSpec(argv=("sh", "-c", script))) as handle:
        lines = [item for item in [i async for i in handle] if isinstance(item, bytes)]
        return lines, await handle.wait()


def names(client: docker.DockerClient, run_labels: dict[str, str]) -> set[str]:
    filters = {"label": [f"{k}={v}" for k, v in run_labels.items()]}
    return {c.name for c in client.containers.list(all=True, filters=filters)}


async def test_create_reuse_recreate_keeps_workspace(
    manager: SandboxManager, tmp_path: Path, docker_engine: docker.DockerClient
) -> None:
    req = request(tmp_path, spec(lifecycle="session"), session_id="c1")
    first = await manager.acquire(req)
    assert (await sh(manager, first, "echo kept > /workspace/note.txt; whoami"))[0] == [b"sandbox"]
    await manager.release(first)
    second = await manager.acquire(req)
    assert second.ref.id == first.ref.id and not second.created
    await manager.release(second)
    changed = request(
        tmp_path, spec(lifecycle="session", environment={"MODE": "2"}), session_id="c1", owner=req.owner
    )
    third = await manager.acquire(changed)
    assert third.ref.id != first.ref.id and third.created
    assert (await sh(manager, third, "cat /workspace/note.txt; echo $MODE"))[0] == [b"kept", b"2"]
    with pytest.raises(docker.errors.NotFound):
        docker_engine.containers.get(first.ref.id)


@pytest.mark.parametrize("ending", ["ok", "error", "cancel"])
async def test_oneshot_removed_after_the_turn(
    manager: SandboxManager, tmp_path: Path, docker_engine: docker.DockerClient, ending: str
) -> None:
    seen: list[str] = []
    leased = anyio.Event()

    async def turn() -> None:
        async with manager.lease(request(tmp_path, spec())) as lease:
            seen.append(lease.ref.id)
            assert docker_engine.containers.get(lease.ref.id).status == "running"
            if ending == "error":
                raise RuntimeError("turn failed")
            if ending == "cancel":
                leased.set()
                await sh(manager, lease, "sleep 30")

    if ending == "error":
        with pytest.raises(RuntimeError):
            await turn()
    elif ending == "cancel":  # cancelled once it holds the box, however long the engine took to start it
        async with anyio.create_task_group() as tg:
            tg.start_soon(turn)
            await leased.wait()
            tg.cancel_scope.cancel()
    else:
        await turn()
    assert seen
    with pytest.raises(docker.errors.NotFound):
        docker_engine.containers.get(seen[0])


async def test_session_reaped_when_idle_but_not_during_a_long_turn(
    manager: SandboxManager, tmp_path: Path
) -> None:
    busy_req = request(tmp_path, spec(lifecycle="session", idle_timeout="2s"), session_id="busy")
    idle_req = request(
        tmp_path, spec(lifecycle="session", idle_timeout="2s"), session_id="idle", owner=busy_req.owner
    )
    busy = await manager.acquire(busy_req)
    idle = await manager.acquire(idle_req)
    await manager.release(idle)
    reaper = Reaper(manager, interval=0.2)
    async with anyio.create_task_group() as tg:
        tg.start_soon(reaper.run)
        lines, code = await sh(manager, busy, "sleep 5; echo finished")
        assert (lines, code) == ([b"finished"], 0)
        assert manager.registry.get(idle.ref.name) is None
        assert manager.registry.get(busy.ref.name) is not None
        await manager.release(busy)
        with anyio.fail_after(5):
            while manager.registry.get(busy.ref.name) is not None:  # noqa: ASYNC110 - wait for the reaper
                await anyio.sleep(0.1)
        tg.cancel_scope.cancel()
    assert await manager.backend.find({"cage.sandbox": idle.ref.name}) == []
    assert await manager.backend.find({"cage.sandbox": busy.ref.name}) == []


async def test_reconcile_after_restart(
    manager: SandboxManager,
    backend: DockerBackend,
    settings: Settings,
    sandbox_image: str,
    tmp_path: Path,
    case_labels: dict[str, str],
) -> None:
    kept = await manager.acquire(
        request(tmp_path, spec(lifecycle="session", idle_timeout="90s"), session_id="c")
    )
    orphan = await manager.acquire(request(tmp_path, spec()))  # a oneshot never released: a crash
    restarted = SandboxManager(
        backend, FakeImageBuilder(tag=sandbox_image), settings, extra_labels=case_labels
    )
    report = await reconcile(restarted, lambda assistant: assistant == "tests.echo")
    assert report.adopted == (kept.ref.name,)
    assert report.removed == (orphan.ref.name,)
    box = restarted.registry.get(kept.ref.name)
    assert box is not None and box.idle_timeout == 90.0 and box.busy == 0
    again = await restarted.acquire(
        request(
            tmp_path,
            kept_spec := spec(lifecycle="session", idle_timeout="90s"),
            session_id="c",
            owner=kept.identity.owner,
        )
    )
    assert again.ref.id == kept.ref.id and kept_spec.lifecycle.value == "session"


async def test_two_hundred_concurrent_acquires_make_one_container(
    manager: SandboxManager,
    tmp_path: Path,
    docker_engine: docker.DockerClient,
    test_run_labels: dict[str, str],
) -> None:
    req = request(tmp_path, spec(lifecycle="session"), session_id="crowd")
    leases: list[SandboxLease] = []

    async def one() -> None:
        leases.append(await manager.acquire(req))

    async with anyio.create_task_group() as tg:
        for _ in range(200):
            tg.start_soon(one)
    assert len({lease.ref.id for lease in leases}) == 1 and len(leases) == 200
    matching = [n for n in names(docker_engine, test_run_labels) if n == leases[0].ref.name]
    assert matching == [leases[0].ref.name]


async def test_limits_visible_in_docker_inspect(
    manager: SandboxManager, tmp_path: Path, docker_engine: docker.DockerClient
) -> None:
    lease = await manager.acquire(
        request(tmp_path, spec(computer={"memory": "256m", "pids": 100, "cpus": 0.5, "ports": [8080]}))
    )
    attrs = docker_engine.containers.get(lease.ref.id).attrs
    host = attrs["HostConfig"]
    assert attrs["Config"]["User"] == "sandbox"
    assert host["CapDrop"] == ["ALL"] and not host["CapAdd"]
    assert "no-new-privileges:true" in host["SecurityOpt"]
    assert host["PidsLimit"] == 100 and host["Memory"] == 256 * 2**20 and host["NanoCpus"] == 500_000_000
    assert not host["ExtraHosts"] and not host["PortBindings"]  # isolated: its relay publishes the port
    relay = docker_engine.containers.get(f"{lease.ref.name}-ports").attrs["HostConfig"]
    assert [b["HostIp"] for b in relay["PortBindings"]["8080/tcp"]] == ["127.0.0.1"]
    lines, _ = await sh(manager, lease, "id -u; grep CapEff /proc/self/status")
    assert lines == [b"1000", b"CapEff:\t0000000000000000"]
    await manager.release(lease)


async def test_read_only_root_with_writable_workspace(manager: SandboxManager, tmp_path: Path) -> None:
    lease = await manager.acquire(request(tmp_path, spec(computer={"read_only": True})))
    lines, code = await sh(
        manager,
        lease,
        "touch /etc/x 2>/dev/null && echo rootfs-writable; echo w > /workspace/f && echo ws-ok; echo t > /tmp/t && echo tmp-ok",
    )
    assert (lines, code) == ([b"ws-ok", b"tmp-ok"], 0)


async def test_prepare_once_runs_once_per_hash(manager: SandboxManager, tmp_path: Path) -> None:
    steps = [
        {"action": "exec", "cmd": "echo once >> /workspace/once.log", "once": True},
        {"action": "exec", "cmd": "echo each >> /workspace/each.log"},
        {"action": "file", "path": "~/cfg/app.json", "content": '{"a": 1}'},
    ]
    req = request(tmp_path, spec(lifecycle="session", prepare=steps), session_id="p")
    for _ in range(3):
        lease = await manager.acquire(req)
        await manager.release(lease)
    lines, _ = await sh(
        manager,
        lease,
        "wc -l < /workspace/once.log; wc -l < /workspace/each.log; cat /workspace/cfg/app.json; echo; stat -c %U /workspace/cfg/app.json",
    )
    assert lines == [b"1", b"3", b'{"a": 1}', b"sandbox"]
    changed = request(
        tmp_path,
        spec(lifecycle="session", prepare=steps, environment={"X": "1"}),
        session_id="p",
        owner=req.owner,
    )
    lease = await manager.acquire(changed)
    assert (await sh(manager, lease, "wc -l < /workspace/once.log"))[0] == [b"2"]


async def test_symlink_out_of_the_workspace_is_refused(manager: SandboxManager, tmp_path: Path) -> None:
    req = request(tmp_path, spec(lifecycle="session"), session_id="s")
    lease = await manager.acquire(req)
    await sh(manager, lease, "ln -s /etc /workspace/etc-link")
    await manager.release(lease)
    evil = request(
        tmp_path,
        spec(lifecycle="session", prepare=[{"action": "file", "path": "etc-link/evil", "content": "x"}]),
        session_id="s",
        owner=req.owner,
    )
    with pytest.raises(WorkspaceError):
        await manager.acquire(evil)
    dotdot = request(
        tmp_path,
        spec(lifecycle="session", prepare=[{"action": "file", "path": "../etc/evil", "content": "x"}]),
        session_id="s",
        owner=req.owner,
    )
    with pytest.raises(WorkspaceError):
        await manager.acquire(dotdot)
    check = await manager.acquire(req)
    lines, _ = await sh(
        manager, check, "test -e /etc/evil && echo written; test -L /workspace/etc-link && echo link-kept"
    )
    assert lines == [b"link-kept"]
