"""The egress proxies' configuration on Kubernetes: rendered from the sandbox pods (golden), and
written into every running proxy pod in turns; the pod listing and the exec are in-memory here
(the real ones run in tests/k8s, the write script in tests/integration/images)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from orchestrator.errors import SandboxError
from orchestrator.sandbox.backend import FleetStateBackend
from orchestrator.sandbox.kubernetes.backend import KubernetesBackend
from orchestrator.sandbox.kubernetes.egress import (
    LOCK_KEY,
    RENDERED_MARK,
    KubeEgress,
    ProxyPod,
    SandboxPod,
    egress_clients,
    needs_proxy,
    render_pods,
)
from orchestrator.sandbox.manager import SandboxManager
from orchestrator.settings import Settings
from tests.golden.k8s.cases import HERE, SANDBOX_PODS, SQUID_GOLDEN, squid_case
from tests.unit.sandbox.fakes import FakeBackend, FakeImageBuilder


def test_the_configuration_of_pods_is_unchanged() -> None:
    assert squid_case() == (HERE / SQUID_GOLDEN).read_text(), "run `python -m tests.golden.k8s.regenerate`"
    assert squid_case().startswith(RENDERED_MARK)  # what a proxy pod's readiness probe looks for


def test_clients_are_the_running_pods_behind_the_proxy_and_every_pod_is_never_a_destination() -> None:
    clients, never = egress_clients(SANDBOX_PODS)
    assert [(c.name, c.sources, c.policy.mode) for c in clients] == [
        ("cage-codex-1", ("10.244.1.17/32",), "allow"),
        ("cage-claude-2", ("10.244.2.5/32", "fd00:10:244:2::5/128"), "bridge"),
    ]
    assert never == [
        "10.244.1.17/32",
        "10.244.1.30/32",
        "10.244.2.5/32",
        "10.244.3.9/32",
        "fd00:10:244:2::5/128",
    ]
    text = render_pods(SANDBOX_PODS)
    assert "cage-old-4" not in text and "cage-pending-5" not in text and "cage-odd-6" not in text
    assert "10.244.1.31" not in text  # a terminating pod's IP may belong to another pod any moment


def test_only_bridge_and_allowlists_need_the_proxy() -> None:
    assert needs_proxy("bridge") and needs_proxy("allow:a.example")
    assert not needs_proxy("none") and not needs_proxy(None) and not needs_proxy("allow:")


class Cluster:
    """Sandbox and proxy pods in memory, and each proxy's squid.conf as the write script leaves it."""

    def __init__(self, proxies: list[ProxyPod], pods: list[SandboxPod], *, ready_after: int = 0) -> None:
        self.proxies = proxies
        self.pods = pods
        self.conf: dict[str, str] = {}
        self.refuse: set[str] = set()
        self.locks: list[str] = []
        self.ready_after = ready_after
        """Listings after which every running proxy reads as ready (its probe passed)."""

    async def list_pods(self) -> list[SandboxPod]:
        return list(self.pods)

    async def list_proxies(self) -> list[ProxyPod]:
        if self.ready_after == 0:
            return [ProxyPod(p.name, p.running, p.running) for p in self.proxies if p.running] + [
                p for p in self.proxies if not p.running
            ]
        self.ready_after -= 1
        return list(self.proxies)

    async def write(self, proxy: str, conf: bytes) -> tuple[int, str]:
        if proxy in self.refuse:
            return 5, "FATAL: Bungled squid.conf line 3"
        self.conf[proxy] = conf.decode()
        return 0, ""

    @asynccontextmanager
    async def lock(self, key: str) -> AsyncIterator[None]:
        self.locks.append(key)
        yield

    def egress(self, *, ready_timeout: float = 60.0) -> KubeEgress:
        return KubeEgress(
            "team-a",
            sandboxes=self.list_pods,
            proxies=self.list_proxies,
            write=self.write,
            selector="app.kubernetes.io/component=egress",
            ready_timeout=ready_timeout,
        )


BRIDGE = SandboxPod("box-1", ("10.244.0.9",), "bridge")


async def test_admit_writes_every_running_proxy_in_the_fleets_turn() -> None:
    cluster = Cluster([ProxyPod("p-1", True, True), ProxyPod("p-2", True), ProxyPod("p-3", False)], [BRIDGE])
    egress = cluster.egress()
    egress.use_cluster_lock(cluster.lock)
    await egress.admit("box-1")
    assert set(cluster.conf) == {"p-1", "p-2"}  # p-3's squid does not run yet: its start reads it
    assert "\n# box-1: bridge\n" in cluster.conf["p-1"] and cluster.conf["p-1"] == cluster.conf["p-2"]
    assert cluster.locks == [LOCK_KEY.format(namespace="team-a")]


async def test_admit_waits_until_a_fresh_proxy_is_ready() -> None:
    cluster = Cluster([ProxyPod("p-1", True)], [BRIDGE], ready_after=3)
    await cluster.egress().admit("box-1")
    assert cluster.ready_after == 0 and "box-1" in cluster.conf["p-1"]
    cluster = Cluster([ProxyPod("p-1", True)], [BRIDGE], ready_after=10**9)
    with pytest.raises(SandboxError, match="no egress proxy pod became ready within 0s"):
        await cluster.egress(ready_timeout=0.2).admit("box-1")


async def test_admit_names_what_is_missing() -> None:
    cluster = Cluster([], [BRIDGE])
    with pytest.raises(SandboxError, match=r"no egress proxy pod runs in namespace team-a .*cage-egress"):
        await cluster.egress().admit("box-1")
    cluster.proxies = [ProxyPod("p-1", True)]
    cluster.pods = [SandboxPod("box-1", (), "bridge")]
    with pytest.raises(SandboxError, match="has no IP"):
        await cluster.egress().admit("box-1")
    assert cluster.conf == {}


async def test_a_proxy_that_refuses_fails_the_admission_but_not_a_refresh() -> None:
    cluster = Cluster([ProxyPod("p-1", True), ProxyPod("p-2", True)], [BRIDGE])
    cluster.refuse = {"p-2"}
    with pytest.raises(SandboxError, match=r"p-2 \(exit 5: FATAL: Bungled"):
        await cluster.egress().admit("box-1")
    assert await cluster.egress().refresh() == 1
    assert "box-1" in cluster.conf["p-1"]


async def test_a_refresh_drops_pods_that_went_away() -> None:
    cluster = Cluster([ProxyPod("p-1", True)], [BRIDGE])
    egress = cluster.egress()
    await egress.admit("box-1")
    cluster.pods = [SandboxPod("box-1", ("10.244.0.9",), "bridge", gone=True)]
    assert await egress.refresh() == 1
    assert "box-1" not in cluster.conf["p-1"] and "10.244.0.9" not in cluster.conf["p-1"]
    cluster.proxies = []
    assert await egress.refresh() == 0  # `none` sandboxes need no proxy: nothing to write, no error


async def test_the_manager_hands_the_fleet_lock_to_the_kubernetes_backend(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, backend="kubernetes", k8s_namespace="team-a")
    backend = KubernetesBackend(settings)  # makes no API call until used
    assert isinstance(backend, FleetStateBackend)
    cluster = Cluster([ProxyPod("p-1", True)], [BRIDGE])
    backend.egress = cluster.egress()
    manager = SandboxManager(backend, FakeImageBuilder(), settings)
    manager.cluster_lock = cluster.lock
    await backend.egress.admit("box-1")
    assert cluster.locks == ["egress:team-a"]
    assert not isinstance(FakeBackend(), FleetStateBackend)  # the Docker proxy's lock is an flock
