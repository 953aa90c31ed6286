"""KubernetesBackend's REST paths against the local API stand-in: readiness with RBAC missing,
create (schema-valid bodies), find by exact labels, inspect, stop/start, volumes, remove, sweep."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orchestrator.errors import EngineUnavailable, SandboxNotFound
from orchestrator.sandbox.backend import CreateSpec, SandboxState, VolumeMount
from orchestrator.sandbox.kubernetes.backend import KubernetesBackend
from orchestrator.sandbox.network import EgressPolicy
from orchestrator.settings import Settings
from tests.unit.sandbox.kubernetes.exec_server import Store, exec_server

LABELS = {"cage.managed": "true", "cage.owner": "alice@example.com", "cage.config-hash": "f" * 64}


@pytest.fixture
def store() -> Store:
    return Store()


@pytest.fixture
async def backend(tmp_path: Path, store: Store) -> AsyncIterator[KubernetesBackend]:
    async with exec_server(tmp_path, store) as kubeconfig:
        made = KubernetesBackend(Settings(data_dir=tmp_path / "cage", k8s_kubeconfig=kubeconfig))
        try:
            yield made
        finally:
            await made.aclose()


async def test_readiness_names_the_missing_rbac(backend: KubernetesBackend, store: Store) -> None:
    await backend.ping()
    store.denied = {("create", "pods/exec"), ("create", "networkpolicies")}
    with pytest.raises(EngineUnavailable, match="does not allow: create pods/exec, create networkpolicies"):
        await backend.ping()


async def test_a_sandbox_lifecycle(backend: KubernetesBackend, store: Store) -> None:
    assert await backend.ensure_volume("Cage_WS", LABELS) is True
    assert await backend.ensure_volume("Cage_WS", LABELS) is False
    spec = CreateSpec(
        image="cage/runner:1",
        name="Cage_Box",
        command=("sleep", "infinity"),
        labels=LABELS,
        user="sandbox",
        mounts=(VolumeMount(source="Cage_WS", target="/workspace", owner=(1000, 1000)),),
        egress=EgressPolicy(mode="none"),
    )
    ref = await backend.create(spec)
    assert ("networkpolicies", "cage", ref.id) in store.objects
    await backend.start(ref)
    (found,) = await backend.find({"cage.owner": "alice@example.com"})
    assert (found.id, found.name, found.status) == (ref.id, "Cage_Box", SandboxState.RUNNING)
    assert found.labels == LABELS  # exact values back from the annotations
    assert await backend.find({"cage.owner": "bob@example.com"}) == []
    info = await backend.inspect(ref.id)
    assert info.user == "1000" and info.started_at is not None and info.image == "cage/runner:1"
    assert [v.name for v in await backend.list_volumes(LABELS)] == ["Cage_WS"]
    assert await backend.list_volumes(LABELS, unused=True) == []
    await backend.stop(ref, timeout=0)
    with pytest.raises(SandboxNotFound):
        await backend.inspect(ref.id)
    await backend.start(ref)  # re-created from the manifest this process made
    assert (await backend.inspect(ref.id)).ref.status is SandboxState.RUNNING
    await backend.remove(ref, force=True)
    await backend.remove(ref, force=True)  # already gone: not an error
    assert ("networkpolicies", "cage", ref.id) not in store.objects
    assert [v.name for v in await backend.list_volumes(LABELS, unused=True)] == ["Cage_WS"]
    await backend.remove_volume("Cage_WS")
    await backend.remove_volume("Cage_WS")
    assert await backend.list_volumes(LABELS) == []


async def test_sweep_removes_policies_whose_pod_is_gone(backend: KubernetesBackend, store: Store) -> None:
    spec = CreateSpec(image="i:1", name="cage-orphan", labels=LABELS, egress=EgressPolicy(mode="bridge"))
    ref = await backend.create(spec)
    del store.objects[("pods", "cage", ref.id)]
    backend._made.clear()  # another process made it
    assert await backend.sweep_networks() == [ref.id]
    assert await backend.sweep_networks() == []
