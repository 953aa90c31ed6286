"""The sandbox backend contract against a real cluster: `KUBECONFIG=... make test-k8s`.

Without KUBECONFIG every test here is skipped with that reason (no cluster can run where the
rest of the suite runs). Knobs: CAGE_K8S_NAMESPACE (must exist; default `cage-test`),
CAGE_K8S_TEST_IMAGE (an image the cluster can pull with sh, setsid, tar and base64; default
`debian:bookworm-slim`), CAGE_K8S_STORAGE_CLASS, CAGE_K8S_RUNTIME_CLASS.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orchestrator.sandbox.backend import CreateSpec, ResourceLimits, SandboxRef, VolumeMount
from orchestrator.sandbox.kubernetes.backend import KubernetesBackend
from orchestrator.sandbox.network import EgressPolicy
from orchestrator.settings import Settings

NO_CLUSTER = "no KUBECONFIG set: the Kubernetes contract runs with `KUBECONFIG=... make test-k8s`"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("KUBECONFIG"):
        return
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.skip(reason=NO_CLUSTER))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "cage",
        backend="kubernetes",
        k8s_namespace=os.environ.get("CAGE_K8S_NAMESPACE", "cage-test"),
        k8s_kubeconfig=Path(os.environ["KUBECONFIG"].split(os.pathsep)[0]),
        acquire_timeout=300,
    )


@pytest.fixture
async def backend(settings: Settings) -> AsyncIterator[KubernetesBackend]:
    made = KubernetesBackend(settings)
    await made.ping()  # credentials and RBAC first: a clear failure, not twenty
    yield made
    await made.aclose()


@pytest.fixture
def run_labels() -> dict[str, str]:
    return {"cage.managed": "true", "cage.test-run": uuid.uuid4().hex[:12]}


@pytest.fixture
async def box(backend: KubernetesBackend, run_labels: dict[str, str]) -> AsyncIterator[SandboxRef]:
    """A running hardened pod with a fresh workspace PVC and a `none` egress policy."""
    name = f"cage-k8s-{uuid.uuid4().hex[:10]}"
    volume = f"{name}-ws"
    await backend.ensure_volume(volume, run_labels)
    ref = await backend.create(
        CreateSpec(
            image=os.environ.get("CAGE_K8S_TEST_IMAGE", "debian:bookworm-slim"),
            name=name,
            command=("sleep", "infinity"),
            labels={**run_labels, "cage.sandbox": name},
            user="1000:1000",
            workdir="/workspace",
            mounts=(VolumeMount(source=volume, target="/workspace", owner=(1000, 1000)),),
            limits=ResourceLimits(memory_bytes=256 * 2**20, nano_cpus=500_000_000),
            read_only=True,
            tmpfs={"/tmp": "rw,size=64m"},
            egress=EgressPolicy(mode="none"),
        )
    )
    try:
        await backend.start(ref)
        yield ref
    finally:
        await backend.remove(ref, force=True)
        await backend.remove_volume(volume)
