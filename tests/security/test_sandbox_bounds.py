"""H10 / M15: a sandbox is bounded by default; each bound is attacked on the real engine.

* a disk fill against a size-bounded workspace fails the agent's own command, host disk untouched;
* a fork bomb hits the pids limit and nothing else: another sandbox keeps working;
* workspace volumes per owner are capped (`CapacityError`, 429) and idle ones are collected;
* a hung prepare step fails the acquire in time and lets the next acquire through.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import docker
import pytest

from orchestrator.errors import CapacityError, SandboxError
from orchestrator.sandbox.volumes import VolumeCollector
from tests.security.sandbox_rig import *  # noqa: F403 - the fixtures
from tests.security.sandbox_rig import request, sh, spec

pytestmark = pytest.mark.docker
MiB = 2**20


def _writable_layer(client: docker.DockerClient, container_id: str) -> int:
    data = client.api.get(client.api._url("/containers/{0}/json", container_id), params={"size": 1}).json()
    return int(data.get("SizeRw") or 0)


async def test_disk_fill_fails_the_agents_own_write_and_spares_the_host(
    make_manager: Any, tmp_path: Path, docker_engine: docker.DockerClient
) -> None:
    manager = make_manager(workspace_tmpfs_bytes=16 * MiB)
    database = tmp_path / "cage.db"
    database.write_bytes(b"orchestrator state")
    lease = await manager.acquire(request(tmp_path, spec(lifecycle="session"), session_id="fill"))
    _, code, stderr = await sh(manager, lease, "dd if=/dev/zero of=/workspace/fill bs=1M count=200")
    assert code != 0 and b"No space left on device" in stderr
    lines, _, _ = await sh(
        manager, lease, "du -sm /workspace | cut -f1; echo more >> /workspace/x || echo full"
    )
    assert int(lines[0]) <= 16 and lines[-1] == b"full"
    assert _writable_layer(docker_engine, lease.ref.id) < 16 * MiB  # nothing spilled into the layer
    volume = docker_engine.containers.get(lease.ref.id).attrs["Mounts"][0]["Name"]
    assert docker_engine.volumes.get(volume).attrs["Options"]["type"] == "tmpfs"  # not on the engine's disk
    database.write_bytes(database.read_bytes() + b" still writable")
    await manager.release(lease)


async def _host_pids() -> int:
    return len([p async for p in anyio.Path("/proc").glob("[0-9]*")])


@pytest.mark.serial  # counts the host's processes: other workers' CLIs and browsers would count too
async def test_fork_bomb_hits_the_pids_limit_only(
    make_manager: Any, tmp_path: Path, docker_engine: docker.DockerClient
) -> None:
    manager = make_manager()
    bomb = await manager.acquire(
        request(tmp_path, spec(lifecycle="session", computer={"pids": 64}), session_id="b")
    )
    bystander = await manager.acquire(request(tmp_path, spec(lifecycle="session"), session_id="ok"))
    host_pids = await _host_pids()
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            sh,
            manager,
            bomb,
            "exec 2>/workspace/bomb.err; f() { f | f & }; f; exec bash -c 'while :; do sleep 30 & done'",
        )
        await anyio.sleep(4)
        stats = await anyio.to_thread.run_sync(
            lambda: docker_engine.containers.get(bomb.ref.id).stats(stream=False)
        )
        pids = stats["pids_stats"]
        assert pids["limit"] == 64 and 16 < pids["current"] <= 64  # the bomb is held at its limit ...
        assert await _host_pids() < host_pids + 100  # ... and the host is not
        lines, code, _ = await sh(
            manager, bystander, "echo alive; for i in 1 2 3 4 5 6 7 8; do sleep 0.1 & done; wait"
        )
        assert code == 0 and lines == [b"alive"]  # another sandbox keeps working meanwhile
        tg.cancel_scope.cancel()
    with anyio.fail_after(30):
        errors, _, _ = await sh(manager, bomb, "grep -c -i 'fork' /workspace/bomb.err")
        assert int(errors[0]) > 0  # it did run into the limit: fork failed inside the box
        await manager.release(bomb)  # the stray sweep and removal still work on a saturated box
    await manager.release(bystander)


async def test_workspace_volume_cap_is_a_capacity_error(
    make_manager: Any, tmp_path: Path, docker_engine: docker.DockerClient, case_labels: dict[str, str]
) -> None:
    manager = make_manager(max_workspace_volumes_per_owner=2)
    for ws in ("w1", "w2"):
        await manager.release(
            await manager.acquire(request(tmp_path, spec(), owner="capped", workspace_id=ws))
        )
    with pytest.raises(CapacityError, match="workspace volume limit reached for owner capped: at most 2"):
        await manager.acquire(request(tmp_path, spec(), owner="capped", workspace_id="w3"))
    filters = {"label": [f"{k}={v}" for k, v in case_labels.items()] + ["cage.owner=capped"]}
    assert len(docker_engine.volumes.list(filters=filters)) == 2


async def test_volume_gc_removes_only_idle_unused_volumes(
    make_manager: Any, tmp_path: Path, docker_engine: docker.DockerClient, case_labels: dict[str, str]
) -> None:
    manager = make_manager(workspace_idle_timeout=1.0)
    await manager.release(await manager.acquire(request(tmp_path, spec(), owner="gc", workspace_id="idle")))
    held = await manager.acquire(
        request(tmp_path, spec(lifecycle="longrunning"), owner="gc", workspace_id="held")
    )
    await manager.release(held)  # released, but its box still mounts the volume
    await anyio.sleep(1.2)
    recent = await manager.acquire(request(tmp_path, spec(), owner="gc", workspace_id="recent"))
    await manager.release(recent)
    removed = await VolumeCollector(manager).collect()
    filters = {"label": [f"{k}={v}" for k, v in case_labels.items()] + ["cage.owner=gc"]}
    left = {v.attrs["Labels"]["cage.workspace"] for v in docker_engine.volumes.list(filters=filters)}
    assert len(removed) == 1 and left == {"held", "recent"}


async def test_hung_prepare_times_out_and_releases_the_identity_lock(
    make_manager: Any, tmp_path: Path
) -> None:
    manager = make_manager(acquire_timeout=4.0)
    hang_once = "if [ ! -e /workspace/.hung ]; then touch /workspace/.hung; sleep 600; fi"
    req = request(tmp_path, spec(lifecycle="longrunning", prepare=[{"action": "exec", "cmd": hang_once}]))
    started = time.monotonic()
    with pytest.raises(SandboxError, match="not ready within 4s"):
        await manager.acquire(req)
    assert time.monotonic() - started < 15
    with anyio.fail_after(30):
        lease = await manager.acquire(req)
    lines, _, _ = await sh(manager, lease, "ps -eo args | grep -c '[s]leep 600'")
    assert lines == [b"0"]  # the hung step was killed with its exec
    await manager.release(lease)
