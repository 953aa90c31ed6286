"""SandboxManager on the in-memory FakeBackend: identity, reuse, recreate, oneshot, locks, caps."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.dsl.sandbox import Lifecycle, SandboxSpec
from orchestrator.errors import CapacityError, UsageError, WorkspaceError
from orchestrator.redaction import redact
from orchestrator.sandbox.backend import SandboxState
from orchestrator.sandbox.identity import identity_for
from orchestrator.sandbox.labels import CONFIG_HASH, LIFECYCLE, SANDBOX
from orchestrator.sandbox.manager import ReleaseOutcome, SandboxManager, SandboxRequest
from orchestrator.sandbox.network import EgressPolicy
from orchestrator.sandbox.workspace import volume_name
from orchestrator.settings import Settings
from tests.unit.sandbox.fakes import FakeBackend, FakeImageBuilder


def make_spec(**kw: Any) -> SandboxSpec:
    data: dict[str, Any] = {"version": "2.0", "runner": {"name": "claude"}}
    data.update(kw)
    return SandboxSpec.model_validate(data)


def _name(lifecycle: Lifecycle, *, session_id: str | None = None, workspace_id: str | None = None) -> str:
    ident = identity_for(
        lifecycle, owner="alice", assistant_id="tests.echo", session_id=session_id, workspace_id=workspace_id
    )
    return ident.name


def make_request(tmp_path: Path, spec: SandboxSpec, **kw: Any) -> SandboxRequest:
    base: dict[str, Any] = {
        "owner": "alice",
        "assistant_id": "tests.echo",
        "assistant_dir": tmp_path,
        "spec": spec,
    }
    base.update(kw)
    return SandboxRequest(**base)


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend(create_delay=0.01)


@pytest.fixture
def manager(backend: FakeBackend) -> SandboxManager:
    settings = Settings(max_sandboxes=5, max_sandboxes_per_owner=3)
    return SandboxManager(backend, FakeImageBuilder(), settings, extra_labels={"cage.test-run": "unit"})


async def test_session_identity_labels_and_reuse(
    manager: SandboxManager, backend: FakeBackend, tmp_path: Path
) -> None:
    req = make_request(tmp_path, make_spec(lifecycle="session"), session_id="c1")
    first = await manager.acquire(req)
    await manager.release(first)
    second = await manager.acquire(req)
    assert first.ref.name == _name(Lifecycle.SESSION, session_id="c1") and first.created
    assert second.ref.id == first.ref.id and not second.created
    labels = backend.boxes[first.ref.id].ref.labels
    assert labels[SANDBOX] == first.ref.name and labels[LIFECYCLE] == "session"
    assert labels["cage.test-run"] == "unit" and len(labels[CONFIG_HASH]) == 64
    assert backend.created == 1


async def test_longrunning_identity_uses_the_workspace(manager: SandboxManager, tmp_path: Path) -> None:
    lease = await manager.acquire(
        make_request(tmp_path, make_spec(lifecycle="longrunning"), workspace_id="ws1")
    )
    assert lease.ref.name == _name(Lifecycle.LONGRUNNING, workspace_id="ws1")


async def test_stopped_box_is_started_on_reuse(
    manager: SandboxManager, backend: FakeBackend, tmp_path: Path
) -> None:
    req = make_request(tmp_path, make_spec(lifecycle="persistent"))
    lease = await manager.acquire(req)
    await manager.release(lease)
    await backend.stop(lease.ref)
    again = await manager.acquire(req)
    assert again.ref.id == lease.ref.id
    assert backend.boxes[lease.ref.id].ref.status is SandboxState.RUNNING


async def test_hash_change_recreates_and_keeps_the_workspace(
    manager: SandboxManager, backend: FakeBackend, tmp_path: Path
) -> None:
    first = await manager.acquire(make_request(tmp_path, make_spec(lifecycle="session"), session_id="c1"))
    await backend.put_files(first.ref, "/workspace", [])
    from orchestrator.sandbox.backend import FileEntry

    await backend.put_files(first.ref, "/workspace", [FileEntry(path="notes.txt", content=b"keep me")])
    await manager.release(first)
    changed = make_spec(lifecycle="session", environment={"MODE": "new"})
    second = await manager.acquire(make_request(tmp_path, changed, session_id="c1"))
    assert second.ref.id != first.ref.id and second.created
    assert first.ref.id not in backend.boxes
    assert second.config_hash != first.config_hash
    assert await backend.get_file(second.ref, "/workspace/notes.txt") == b"keep me"


@pytest.mark.parametrize("ending", ["ok", "error", "cancel"])
async def test_oneshot_is_removed_however_the_turn_ends(
    manager: SandboxManager, backend: FakeBackend, tmp_path: Path, ending: str
) -> None:
    req = make_request(tmp_path, make_spec())
    names: list[str] = []

    async def turn() -> None:
        async with manager.lease(req) as lease:
            names.append(lease.ref.name)
            assert lease.ref.name.startswith("cage-")
            if ending == "error":
                raise RuntimeError("turn failed")
            if ending == "cancel":
                scope.cancel()  # cancelled mid-turn, however long the acquire took
                await anyio.sleep(10)

    scope = anyio.CancelScope()
    if ending == "error":
        with pytest.raises(RuntimeError):
            await turn()
    elif ending == "cancel":
        with scope:
            await turn()
    else:
        await turn()
    assert names and backend.boxes == {}
    assert backend.removed == names
    assert len(manager.registry) == 0


async def test_oneshot_names_are_fresh(manager: SandboxManager, tmp_path: Path) -> None:
    req = make_request(tmp_path, make_spec())
    a = await manager.acquire(req)
    b = await manager.acquire(req)
    assert a.ref.name != b.ref.name


async def test_concurrent_first_acquires_create_one_container(tmp_path: Path) -> None:
    backend = FakeBackend(create_delay=0.05)
    manager = SandboxManager(backend, FakeImageBuilder(), Settings())
    req = make_request(tmp_path, make_spec(lifecycle="session"), session_id="c1")
    ids: list[str] = []

    async def one() -> None:
        ids.append((await manager.acquire(req)).ref.id)

    async with anyio.create_task_group() as tg:
        for _ in range(200):
            tg.start_soon(one)
    assert len(ids) == 200 and len(set(ids)) == 1
    assert backend.created == 1 and len(backend.boxes) == 1
    box = manager.registry.get(_name(Lifecycle.SESSION, session_id="c1"))
    assert box is not None and box.busy == 200
    assert len(manager.locks) == 0


async def test_per_owner_cap_refuses_without_creating(
    manager: SandboxManager, backend: FakeBackend, tmp_path: Path
) -> None:
    spec = make_spec(lifecycle="session")
    for session in ("a", "b", "c"):
        await manager.acquire(make_request(tmp_path, spec, session_id=session))
    with pytest.raises(CapacityError) as info:
        await manager.acquire(make_request(tmp_path, spec, session_id="d"))
    assert info.value.limit == 3 and "alice" in info.value.scope
    assert backend.created == 3
    # reusing an existing box is not a new sandbox
    assert (await manager.acquire(make_request(tmp_path, spec, session_id="a"))).ref.name == _name(
        Lifecycle.SESSION, session_id="a"
    )


async def test_global_cap_under_concurrency(
    manager: SandboxManager, backend: FakeBackend, tmp_path: Path
) -> None:
    spec = make_spec(lifecycle="session")
    results: list[str] = []

    async def one(owner: str, session: str) -> None:
        try:
            await manager.acquire(make_request(tmp_path, spec, owner=owner, session_id=session))
            results.append("ok")
        except CapacityError:
            results.append("cap")

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(one, f"owner{i % 6}", f"c{i}")
    assert results.count("ok") == 5 and results.count("cap") == 7
    assert backend.created == 5


@pytest.mark.parametrize(
    ("field", "value"),
    [("owner", "../etc"), ("assistant_id", "a b"), ("session_id", "x" * 65), ("workspace_id", "a/b")],
)
async def test_bad_ids_are_refused(
    manager: SandboxManager, backend: FakeBackend, tmp_path: Path, field: str, value: str
) -> None:
    req = make_request(tmp_path, make_spec(lifecycle="session"), **{"session_id": "c1", field: value})
    with pytest.raises(WorkspaceError):
        await manager.acquire(req)
    assert backend.created == 0


async def test_session_without_session_is_a_usage_error(manager: SandboxManager, tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        await manager.acquire(make_request(tmp_path, make_spec(lifecycle="session")))


async def test_hardening_defaults_and_overrides(
    manager: SandboxManager, backend: FakeBackend, tmp_path: Path
) -> None:
    lease = await manager.acquire(make_request(tmp_path, make_spec()))
    spec = backend.boxes[lease.ref.id].spec
    assert spec.user == "sandbox" and spec.cap_drop == ("ALL",) and spec.cap_add == ()
    assert "no-new-privileges:true" in spec.security_opt
    assert (
        spec.limits.memory_bytes == 2 * 2**30
        and spec.limits.pids == 512
        and spec.limits.nano_cpus == 2 * 10**9
    )
    assert spec.egress == EgressPolicy(mode="bridge") and spec.extra_hosts == {}  # isolated by default
    assert spec.mounts[0].kind == "volume" and spec.mounts[0].source == volume_name(
        identity_for(
            Lifecycle.ONESHOT, owner="alice", assistant_id="tests.echo", session_id=None, workspace_id=None
        )
    )
    custom = make_spec(
        computer={"memory": "512m", "cpus": 1.5, "pids": 64, "network": "none", "read_only": True}
    )
    lease = await manager.acquire(make_request(tmp_path, custom))
    spec = backend.boxes[lease.ref.id].spec
    assert spec.limits.memory_bytes == 512 * 2**20 and spec.limits.nano_cpus == 1_500_000_000
    assert spec.limits.pids == 64 and spec.network == "none" and spec.extra_hosts == {}
    assert spec.read_only and "/tmp" in spec.tmpfs


async def test_a_box_with_ports_is_isolated_and_keeps_its_ports(
    manager: SandboxManager, backend: FakeBackend, tmp_path: Path
) -> None:
    lease = await manager.acquire(make_request(tmp_path, make_spec(computer={"ports": [3000]})))
    spec = backend.boxes[lease.ref.id].spec
    assert lease.isolated and spec.egress == EgressPolicy(mode="bridge") and spec.extra_hosts == {}
    assert [(p.container_port, p.host_port) for p in spec.ports] == [(3000, 0)]  # the backend relays them
    assert spec.env["HTTP_PROXY"] == "http://cage-egress:3128"


async def test_host_workspace_is_bind_mounted(
    manager: SandboxManager, backend: FakeBackend, tmp_path: Path
) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    os.chown(checkout, 1234, 1234)  # the agent runs as the checkout's owner
    lease = await manager.acquire(make_request(tmp_path, make_spec(), host_workspace=checkout))
    spec = backend.boxes[lease.ref.id].spec
    mount = spec.mounts[0]
    assert mount.kind == "bind" and mount.source == str(await anyio.Path(checkout).resolve())
    assert spec.user == lease.user == "1234:1234" and (lease.uid, lease.gid) == (1234, 1234)


async def test_secrets_reach_exec_env_but_never_labels(
    manager: SandboxManager, backend: FakeBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAGE_TEST_TOKEN_VALUE", "s3cr3t-value-123")
    spec = make_spec(secrets={"tok": {"value": "$ENV.CAGE_TEST_TOKEN_VALUE", "env": "API_TOKEN"}})
    lease = await manager.acquire(make_request(tmp_path, spec))
    assert lease.env["API_TOKEN"] == "s3cr3t-value-123"
    box = backend.boxes[lease.ref.id]
    assert "s3cr3t-value-123" not in repr(box.ref.labels) and "s3cr3t-value-123" not in repr(box.spec.env)
    assert "s3cr3t-value-123" not in repr(lease)
    assert redact("token is s3cr3t-value-123") == "token is ***"


async def test_release_is_idempotent_and_starts_the_idle_clock(tmp_path: Path) -> None:
    now = [100.0]
    backend = FakeBackend()
    manager = SandboxManager(backend, FakeImageBuilder(), Settings(), clock=lambda: now[0])
    lease = await manager.acquire(make_request(tmp_path, make_spec(lifecycle="session"), session_id="c"))
    box = manager.registry.get(lease.ref.name)
    assert box is not None and box.busy == 1 and box.idle_for(500.0) == 0.0
    now[0] = 150.0
    await manager.release(lease, ReleaseOutcome.OK)
    await manager.release(lease, ReleaseOutcome.OK)
    assert box.busy == 0 and box.idle_for(160.0) == 10.0
