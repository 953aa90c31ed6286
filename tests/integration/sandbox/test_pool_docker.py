"""The warm pool on a real Docker engine: claim, refill, isolation between owners, the race of two
processes for the last box, the caps, the reaper and shutdown.

Refills are queued by the test's `spawn` and run when the test says so, so every step is
deterministic; nothing here asserts a duration (speed is `bench/pool.py`'s)."""

from __future__ import annotations

import io
import os
import tarfile
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import docker
import pytest

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.sandbox.backend import ExecSpec
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.labels import ASSISTANT, LIFECYCLE, MANAGED, OWNER, WORKSPACE
from orchestrator.sandbox.manager import SandboxLease, SandboxManager, SandboxRequest
from orchestrator.sandbox.pool import POOL
from orchestrator.sandbox.reaper import Reaper
from orchestrator.settings import Settings
from tests.unit.sandbox.fakes import FakeImageBuilder

Work = Callable[[], Coroutine[Any, Any, None]]


def spec(size: int = 1, **kw: Any) -> SandboxSpec:
    return SandboxSpec.model_validate(
        {"version": "2.0", "runner": {"name": "claude"}, "pool": {"size": size}, **kw}
    )


def request(tmp_path: Path, sandbox: SandboxSpec, owner: str, **kw: Any) -> SandboxRequest:
    kw.setdefault("assistant_id", "tests.pool")
    return SandboxRequest(owner=owner, assistant_dir=tmp_path, spec=sandbox, **kw)


async def sh(manager: SandboxManager, lease: SandboxLease, script: str) -> tuple[list[bytes], int]:
    async with await manager.exec(lease, ExecSpec(argv=("sh", "-c", script))) as handle:
        lines = [item for item in [i async for i in handle] if isinstance(item, bytes)]
        return lines, await handle.wait()


async def run(pending: list[Work]) -> None:
    """Run the refills the pool queued (and those they queue)."""
    while pending:
        await pending.pop(0)()


@dataclass(frozen=True)
class Box:
    id: str
    name: str
    status: str
    labels: dict[str, str]


def pooled(client: docker.DockerClient, labels: dict[str, str]) -> list[Box]:
    """This test's containers made for a pool (claimed or not), read in one engine call (a box removed
    meanwhile cannot fail the listing)."""
    filters = {"label": [f"{k}={v}" for k, v in labels.items()] + [POOL]}
    rows = client.api.containers(all=True, filters=filters)
    return [Box(row["Id"], row["Names"][0].lstrip("/"), row["State"], row["Labels"] or {}) for row in rows]


def plant(client: docker.DockerClient, container_id: str, path: str, text: bytes) -> None:
    """Write a file into a box's root file system from outside (an attacker's stand-in)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(path.rsplit("/", 1)[1])
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    client.api.put_archive(container_id, path.rsplit("/", 1)[0], buf.getvalue())


@pytest.fixture
def pending() -> list[Work]:
    return []


@pytest.fixture
def pool_manager(manager: SandboxManager, pending: list[Work]) -> SandboxManager:
    assert manager.start_pool(pending.append) is not None
    return manager


@pytest.fixture
def owner() -> str:
    return f"o{uuid.uuid4().hex[:8]}"


async def test_claim_hands_out_the_owners_running_box_and_refills(
    pool_manager: SandboxManager,
    pending: list[Work],
    tmp_path: Path,
    owner: str,
    docker_engine: docker.DockerClient,
    case_labels: dict[str, str],
) -> None:
    req = request(tmp_path, spec(), owner)
    cold = await pool_manager.acquire(req)
    assert cold.created and not cold.pooled
    assert (await sh(pool_manager, cold, "echo mine > /workspace/note.txt"))[1] == 0
    await pool_manager.release(cold)
    assert pending, "a cold oneshot acquire with a pool queues a refill"
    await run(pending)
    [waiting] = pooled(docker_engine, case_labels)
    assert waiting.status == "paused"
    labels = waiting.labels
    assert (labels[OWNER], labels[ASSISTANT], labels[LIFECYCLE], labels[WORKSPACE]) == (
        owner,
        "tests.pool",
        "oneshot",
        "default",
    )

    warm = await pool_manager.acquire(req)
    assert warm.pooled and not warm.created
    assert warm.ref.id == waiting.id and warm.identity.name == waiting.name
    assert docker_engine.containers.get(warm.ref.id).status == "running"
    lines, code = await sh(pool_manager, warm, "whoami; cat /workspace/note.txt")
    assert (lines, code) == ([b"sandbox", b"mine"], 0)  # the owner's own workspace, nobody else's
    assert pending == []  # the refill waits for the turn to end (see SandboxManager._refills)
    await pool_manager.release(warm)
    with pytest.raises(docker.errors.NotFound):  # a claimed box is removed, never pooled again
        docker_engine.containers.get(warm.ref.id)
    await run(pending)  # refilled in the background after the claimed turn
    fresh = [c for c in pooled(docker_engine, case_labels) if c.status == "paused"]
    assert len(fresh) == 1 and fresh[0].id != warm.ref.id


async def test_a_pooled_box_never_reaches_another_owner_nor_a_second_turn(
    pool_manager: SandboxManager,
    pending: list[Work],
    tmp_path: Path,
    owner: str,
    docker_engine: docker.DockerClient,
    case_labels: dict[str, str],
) -> None:
    mine = request(tmp_path, spec(), owner)
    await pool_manager.release(await pool_manager.acquire(mine))
    await run(pending)
    [waiting] = pooled(docker_engine, case_labels)
    plant(docker_engine, waiting.id, "/tmp/planted", b"owner A's pooled box")

    other = request(tmp_path, spec(), f"x{owner}")  # another owner, same assistant and config
    theirs = await pool_manager.acquire(other)
    assert not theirs.pooled and theirs.ref.id != waiting.id
    assert (await sh(pool_manager, theirs, "cat /tmp/planted"))[1] != 0
    assert (await sh(pool_manager, theirs, "ls -A /workspace"))[0] == []  # their own, empty workspace
    await pool_manager.release(theirs)
    assert docker_engine.containers.get(waiting.id).status == "paused"  # still waiting for its owner

    first = await pool_manager.acquire(mine)
    assert first.pooled and first.ref.id == waiting.id
    assert (await sh(pool_manager, first, "echo turn1 > /tmp/left-by-turn-1"))[1] == 0
    await pool_manager.release(first)
    await run(pending)
    second = await pool_manager.acquire(mine)
    assert second.pooled and second.ref.id != first.ref.id
    assert (await sh(pool_manager, second, "cat /tmp/left-by-turn-1 /tmp/planted"))[1] != 0
    await pool_manager.release(second)


async def test_two_processes_claiming_the_last_box_get_two_boxes(
    pool_manager: SandboxManager,
    pending: list[Work],
    tmp_path: Path,
    owner: str,
    settings: Settings,
    images: FakeImageBuilder,
    case_labels: dict[str, str],
    docker_engine: docker.DockerClient,
) -> None:
    req = request(tmp_path, spec(), owner)
    await pool_manager.release(await pool_manager.acquire(req))
    await run(pending)
    [last] = pooled(docker_engine, case_labels)
    other_pending: list[Work] = []
    other = SandboxManager(DockerBackend(settings), images, settings, extra_labels=case_labels)
    assert other.start_pool(other_pending.append) is not None  # a second replica on the same engine
    leases: dict[str, SandboxLease] = {}

    async def take(name: str, manager: SandboxManager) -> None:
        leases[name] = await manager.acquire(req)

    async with anyio.create_task_group() as tg:
        tg.start_soon(take, "first", pool_manager)
        tg.start_soon(take, "second", other)
    first, second = leases["first"], leases["second"]
    assert first.ref.id != second.ref.id
    assert sorted([first.pooled, second.pooled]) == [False, True]  # one claimed it, one went cold
    assert last.id in (first.ref.id, second.ref.id)
    assert sorted([first.created, second.created]) == [False, True]
    await pool_manager.release(first)
    await other.release(second)


async def test_pooled_boxes_count_against_the_caps_and_give_way_to_a_cold_create(
    docker_engine: docker.DockerClient,
    images: FakeImageBuilder,
    case_labels: dict[str, str],
    tmp_path: Path,
    owner: str,
    pending: list[Work],
) -> None:
    settings = Settings(data_dir=tmp_path / "cage", max_sandboxes=50, max_sandboxes_per_owner=2)
    manager = SandboxManager(DockerBackend(settings), images, settings, extra_labels=case_labels)
    assert manager.start_pool(pending.append) is not None
    req = request(tmp_path, spec(size=3), owner)
    await manager.release(await manager.acquire(req))
    await run(pending)
    assert manager.registry.count(owner) == 2  # the per-owner cap stopped the refill at 2 of 3
    assert len(pooled(docker_engine, case_labels)) == 2
    elsewhere = request(tmp_path, spec(size=0), owner, assistant_id="tests.other")
    lease = await manager.acquire(elsewhere)  # at the cap: one pooled box makes room
    assert lease.created and not lease.pooled
    assert manager.registry.count(owner) == 2
    assert len([c for c in pooled(docker_engine, case_labels) if c.status == "paused"]) == 1
    await manager.release(lease)


async def test_idle_and_stale_pooled_boxes_are_reaped_and_shutdown_removes_the_rest(
    docker_engine: docker.DockerClient,
    images: FakeImageBuilder,
    case_labels: dict[str, str],
    tmp_path: Path,
    owner: str,
    pending: list[Work],
) -> None:
    settings = Settings(data_dir=tmp_path / "cage", pool_idle=3600.0)
    now = [0.0]
    manager = SandboxManager(
        DockerBackend(settings), images, settings, extra_labels=case_labels, clock=lambda: now[0]
    )
    pool = manager.start_pool(pending.append)
    assert pool is not None
    reaper = Reaper(manager, interval=1.0)  # leaves the pooled box to the pool's own sweep
    req = request(tmp_path, spec(), owner)
    await manager.release(await manager.acquire(req))
    await run(pending)
    [idle] = pooled(docker_engine, case_labels)
    assert await pool.sweep() == []  # not idle long enough yet
    now[0] += 3601.0
    assert await reaper.sweep() == []
    assert await pool.sweep() == [idle.name]
    with pytest.raises(docker.errors.NotFound):
        docker_engine.containers.get(idle.id)

    await manager.release(await manager.acquire(req))
    await run(pending)
    [old] = pooled(docker_engine, case_labels)
    changed = request(tmp_path, spec(environment={"MODE": "2"}), owner)  # a new config hash
    lease = await manager.acquire(changed)
    assert not lease.pooled
    await manager.release(lease)
    await run(pending)  # drops the stale box, fills one of the new hash
    with pytest.raises(docker.errors.NotFound):
        docker_engine.containers.get(old.id)
    [new] = pooled(docker_engine, case_labels)
    assert new.labels["cage.config-hash"] == lease.config_hash

    await pool.close()
    assert pooled(docker_engine, case_labels) == []
    assert manager.registry.count() == 0


async def test_a_ci_checkout_and_a_manager_without_pool_never_pool(
    manager: SandboxManager,
    pending: list[Work],
    tmp_path: Path,
    owner: str,
    docker_engine: docker.DockerClient,
    case_labels: dict[str, str],
) -> None:
    plain = await manager.acquire(request(tmp_path, spec(), owner))  # no start_pool: `cage run`
    assert not plain.pooled and manager.pool is None
    await manager.release(plain)
    assert manager.start_pool(pending.append) is not None
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    os.chown(checkout, 1000, 1000)  # a checkout owned by a non-root user, as `cage run` requires
    ci = await manager.acquire(request(tmp_path, spec(), owner, host_workspace=checkout))
    assert not ci.pooled
    await manager.release(ci)
    assert pending == []
    assert pooled(docker_engine, case_labels) == []
    assert (
        docker_engine.containers.list(all=True, filters={"label": [f"{MANAGED}=true", f"{OWNER}={owner}"]})
        == []
    )
