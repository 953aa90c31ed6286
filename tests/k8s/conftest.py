"""The sandbox backend contract against a real cluster: `KUBECONFIG=... make test-k8s`.

`make test` leaves this folder out (no cluster runs where the rest of the suite runs); a plain
`pytest` without KUBECONFIG skips every test here with that reason. Knobs: CAGE_K8S_NAMESPACE (must exist; default `cage-test`),
CAGE_K8S_TEST_IMAGE (an image the cluster can pull with sh, setsid, tar and base64; default
`debian:bookworm-slim`), CAGE_K8S_STORAGE_CLASS, CAGE_K8S_RUNTIME_CLASS; for the egress test
CAGE_K8S_EGRESS_IMAGE (the cage/egress image `cage images push` pushed; it runs as the chart's
`cage-egress` Deployment unless the namespace has one), CAGE_K8S_EGRESS_HOST and
CAGE_K8S_EGRESS_OTHER_HOST (two hosts the cluster reaches over HTTP; `example.com`, `example.org`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.sandbox.backend import CreateSpec, ResourceLimits, SandboxRef, VolumeMount
from orchestrator.sandbox.kubernetes.backend import KubernetesBackend
from orchestrator.sandbox.kubernetes.manifests import services_manifests
from orchestrator.sandbox.kubernetes.proxy import proxy_deployment, proxy_network_policy
from orchestrator.sandbox.network import PROXY_ALIAS, EgressPolicy, proxy_env
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


@asynccontextmanager
async def sandbox(
    backend: KubernetesBackend, run_labels: dict[str, str], policy: EgressPolicy
) -> AsyncIterator[SandboxRef]:
    """A running hardened pod with a fresh workspace PVC and the egress `policy`."""
    name = f"cage-k8s-{uuid.uuid4().hex[:10]}"
    volume = f"{name}-ws"
    await backend.ensure_volume(volume, run_labels)
    ref = await backend.create(
        CreateSpec(
            image=os.environ.get("CAGE_K8S_TEST_IMAGE", "debian:bookworm-slim"),
            name=name,
            command=("sleep", "infinity"),
            labels={**run_labels, "cage.sandbox": name},
            env=proxy_env(),
            user="1000:1000",
            workdir="/workspace",
            mounts=(VolumeMount(source=volume, target="/workspace", owner=(1000, 1000)),),
            limits=ResourceLimits(memory_bytes=256 * 2**20, nano_cpus=500_000_000),
            read_only=True,
            tmpfs={"/tmp": "rw,size=64m"},
            egress=policy,
        )
    )
    try:
        await backend.start(ref)
        yield ref
    finally:
        await backend.remove(ref, force=True)
        await backend.remove_volume(volume)


@pytest.fixture
async def box(backend: KubernetesBackend, run_labels: dict[str, str]) -> AsyncIterator[SandboxRef]:
    """A running hardened pod with a fresh workspace PVC and a `none` egress policy."""
    async with sandbox(backend, run_labels, EgressPolicy(mode="none")) as ref:
        yield ref


@pytest.fixture
async def egress_proxy(backend: KubernetesBackend, settings: Settings) -> AsyncIterator[None]:
    """The chart's egress proxy objects in the namespace (left alone when it has them already)."""
    from kubernetes_asyncio import client, config
    from kubernetes_asyncio.client.exceptions import ApiException

    image = os.environ.get("CAGE_K8S_EGRESS_IMAGE")
    api = await config.new_client_from_config(config_file=str(settings.k8s_kubeconfig))
    # Any: the generated signatures take models, the client takes plain dicts too (as the backend does)
    apps: Any = client.AppsV1Api(api)
    core: Any = client.CoreV1Api(api)
    net: Any = client.NetworkingV1Api(api)
    namespace = settings.k8s_namespace
    made: list[tuple[Any, str]] = []
    try:
        try:
            await apps.read_namespaced_deployment(PROXY_ALIAS, namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            if not image:
                pytest.skip("set CAGE_K8S_EGRESS_IMAGE: the cage/egress image `cage images push` pushed")
            target = backend.target
            await apps.create_namespaced_deployment(
                namespace, proxy_deployment(target, image=image, replicas=1)
            )
            made.append((apps.delete_namespaced_deployment, PROXY_ALIAS))
            await net.create_namespaced_network_policy(namespace, proxy_network_policy(target))
            made.append((net.delete_namespaced_network_policy, PROXY_ALIAS))
            await core.create_namespaced_service(namespace, services_manifests(target)[1])
            made.append((core.delete_namespaced_service, PROXY_ALIAS))
        selector = ",".join(f"{k}={v}" for k, v in sorted(settings.k8s_egress_selector.items()))
        with anyio.fail_after(300):  # pulled and started: the backend writes only running proxies
            while not any(  # noqa: ASYNC110 - the API has no event here: poll
                getattr(status.state, "running", None) is not None
                for pod in (await core.list_namespaced_pod(namespace, label_selector=selector)).items
                for status in (pod.status.container_statuses or [])
            ):
                await anyio.sleep(1)
        yield
    finally:
        for delete, name in reversed(made):
            await delete(name, namespace)
        await api.close()
