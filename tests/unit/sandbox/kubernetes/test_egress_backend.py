"""KubernetesBackend keeps the egress proxies configured, end to end over the local API stand-in
(`exec_server.py`): real HTTP and pods/exec websockets, the real write script run as a local
process in each proxy pod's own directory, with a stand-in `squid -k parse` that refuses a
configuration where a test asks it to, and a process in the pid file that counts the SIGHUPs it
gets (the real squid runs the same script in tests/integration/images/test_egress_proxy_pod.py)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from orchestrator.dsl.sandbox import NetworkAllowlist
from orchestrator.errors import SandboxError
from orchestrator.sandbox.backend import CreateSpec
from orchestrator.sandbox.egress.denials import Denial
from orchestrator.sandbox.kubernetes.backend import KubernetesBackend, target_from
from orchestrator.sandbox.kubernetes.proxy import proxy_deployment
from orchestrator.sandbox.network import EgressPolicy, egress_policy
from orchestrator.settings import Settings
from tests.unit.sandbox.kubernetes.exec_server import Store, exec_server

FAKE_SQUID = """#!/bin/sh
# squid -k parse -f FILE, as the write script calls it
[ "$2" = parse ] || exit 2
[ ! -e "$(dirname "$4")/refuse" ] || { echo "FATAL: Bungled $4 line 1" >&2; exit 1; }
"""
SQUID_PROCESS = 'trap "echo hup >> $1/signals" HUP; echo $$ > $1/squid.pid; while :; do sleep 0.05; done'
"""Stands for a running squid: in the pid file, counting the SIGHUPs (reconfigures) it gets."""


@pytest.fixture
def asyncio_backend() -> str:
    return "asyncio"  # aiohttp (the Kubernetes client's transport) needs asyncio


@dataclass
class Proxies:
    store: Store
    root: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def add(self, name: str, *, squid_runs: bool = True) -> None:
        """A proxy pod of the chart's Deployment, running; `squid_runs`: its pid file is there."""
        template = proxy_deployment(target_from(Settings()), image="cage/egress:x")["spec"]["template"]
        box = template["spec"]["containers"][0]
        self.store.objects[("pods", "cage", name)] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "cage", "labels": template["metadata"]["labels"]},
            "spec": template["spec"],
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {
                        "name": box["name"],
                        "image": box["image"],
                        "imageID": "",
                        "ready": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": "2026-12-01T22:00:01Z"}},
                    }
                ],
            },
        }
        run = self.root / name
        run.mkdir(parents=True)
        if squid_runs:
            self.processes.append(subprocess.Popen(["sh", "-c", SQUID_PROCESS, "squid", str(run)]))
            while not (run / "squid.pid").exists():
                time.sleep(0.01)

    def conf(self, name: str) -> str:
        return (self.root / name / "squid.conf").read_text()

    def reloads(self, name: str, *, at_least: int = 0) -> int:
        """SIGHUPs the squid of `name` got, once it got `at_least` (its trap runs between sleeps)."""
        signals = self.root / name / "signals"
        deadline = time.monotonic() + 10
        while True:
            count = len(signals.read_text().splitlines()) if signals.exists() else 0
            if count >= at_least or time.monotonic() > deadline:
                return count
            time.sleep(0.02)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[KubernetesBackend, Proxies]]:
    store = Store()
    store.root, store.bin = tmp_path / "proxies", tmp_path / "bin"
    store.bin.mkdir()
    (store.bin / "squid").write_text(FAKE_SQUID)
    (store.bin / "squid").chmod(0o755)
    async with exec_server(tmp_path, store) as kubeconfig:
        backend = KubernetesBackend(Settings(data_dir=tmp_path / "cage", k8s_kubeconfig=kubeconfig))
        proxies = Proxies(store, store.root)
        try:
            yield backend, proxies
        finally:
            await backend.aclose()
            for process in proxies.processes:
                process.kill()
                process.wait()


def box(name: str, policy: EgressPolicy) -> CreateSpec:
    labels = {"cage.managed": "true", "cage.sandbox": name}
    return CreateSpec(
        image="debian:bookworm-slim",
        name=name,
        command=("sleep", "1"),
        labels=labels,
        user="1000:1000",
        egress=policy,
    )


async def test_a_sandbox_is_written_into_every_proxy_before_it_runs_and_out_when_it_goes(
    cluster: tuple[KubernetesBackend, Proxies],
) -> None:
    backend, proxies = cluster
    proxies.add("cage-egress-a")
    proxies.add("cage-egress-b", squid_runs=False)  # starting: it reads the file when it does
    bridge = await backend.create(box("box-bridge", EgressPolicy(mode="bridge")))
    await backend.start(bridge)
    for proxy in ("cage-egress-a", "cage-egress-b"):
        assert "\n# box-bridge: bridge\n" in proxies.conf(proxy)
        assert "acl sb_" in proxies.conf(proxy) and " src 10.244.0.1\n" in proxies.conf(proxy)
    assert (proxies.reloads("cage-egress-a", at_least=1), proxies.reloads("cage-egress-b")) == (1, 0)
    written = (proxies.root / "cage-egress-a" / "squid.conf").stat().st_mtime_ns
    await backend.start(bridge)  # started again: the same text, left alone (no rewrite, no reload)
    assert (proxies.root / "cage-egress-a" / "squid.conf").stat().st_mtime_ns == written

    allow = await backend.create(box("box-allow", egress_policy(NetworkAllowlist(allow=["api.github.com"]))))
    await backend.start(allow)
    text = proxies.conf("cage-egress-a")
    assert "# box-bridge: bridge" in text and "# box-allow: allow:api.github.com" in text
    assert "dstdomain -n api.github.com" in text and proxies.reloads("cage-egress-a", at_least=2) == 2

    await backend.remove(bridge, force=True)
    text = proxies.conf("cage-egress-a")
    assert "box-bridge" not in text and "10.244.0.1/32" not in text and "box-allow" in text
    assert proxies.conf("cage-egress-b") == text


async def test_none_needs_no_proxy_and_the_others_say_what_is_missing(
    cluster: tuple[KubernetesBackend, Proxies],
) -> None:
    backend, proxies = cluster
    none = await backend.create(box("box-none", EgressPolicy(mode="none")))
    await backend.start(none)  # no proxy pod at all: `none` is complete with its NetworkPolicy
    bridge = await backend.create(box("box-bridge", EgressPolicy(mode="bridge")))
    with pytest.raises(
        SandboxError, match=r"no egress proxy pod runs in namespace cage .*cage-egress Deployment"
    ):
        await backend.start(bridge)
    proxies.add("cage-egress-a")
    proxies.add("cage-egress-b")
    (proxies.root / "cage-egress-b" / "refuse").touch()
    with pytest.raises(SandboxError, match=r"cage-egress-b \(exit 5: FATAL: Bungled"):
        await backend.start(bridge)
    assert "box-bridge" in proxies.conf("cage-egress-a")
    assert not (proxies.root / "cage-egress-b" / "squid.conf").exists()  # refused: never installed
    (proxies.root / "cage-egress-b" / "refuse").unlink()
    assert await backend.sweep_networks() == []  # the sweep renders again: b takes it now
    assert "box-bridge" in proxies.conf("cage-egress-b")


async def test_a_refused_request_in_a_proxy_log_is_a_denial_of_its_sandbox(
    cluster: tuple[KubernetesBackend, Proxies],
) -> None:
    backend, proxies = cluster
    proxies.add("cage-egress-a")
    proxies.add("cage-egress-b")
    backend._logs._relist = 0.2  # list the proxies often: the test waits on it
    ref = await backend.create(
        box("Cage_Box.Allow", egress_policy(NetworkAllowlist(allow=["api.github.com"])))
    )
    other = await backend.create(box("box-other", EgressPolicy(mode="bridge")))
    await backend.start(ref)
    await backend.start(other)
    hub = backend.egress.denials
    logs = proxies.store.logs
    with hub.subscribe("Cage_Box.Allow") as received:  # its Cage name: its pod is named otherwise
        logs["cage-egress-b"] = [
            "1764626400.123 10.244.0.2 TCP_DENIED/403 403 GET evil.example 80",  # box-other's
            "1764626400.456 10.244.0.1 TCP_MISS/200 200 CONNECT api.github.com 443",  # allowed
            "1764626401.000 10.244.0.1 TCP_DENIED/403 403 CONNECT pypi.org 443",
        ]
        with anyio.fail_after(30):
            denial = await received.receive()
    assert denial == Denial(sandbox="Cage_Box.Allow", host="pypi.org", port=443, method="CONNECT")
    assert hub.counts == {"bridge": 1, "allow": 1}  # both boxes were admitted by this process
    await backend.remove(ref, force=True)
    logs["cage-egress-a"] = ["1764626402.000 10.244.0.1 TCP_DENIED/403 403 GET late.example 80"]
    with hub.subscribe("box-other") as late:  # the IP is nobody's now: not Cage_Box.Allow's any more
        logs["cage-egress-a"].append("1764626403.000 10.244.0.2 TCP_DENIED/403 403 GET x.example 80")
        with anyio.fail_after(30):
            assert (await late.receive()).host == "x.example"
    assert hub.counts == {"bridge": 2, "allow": 1}
    follows = [q for q in proxies.store.log_requests if q.get("follow", "").lower() == "true"]
    assert {q["container"] for q in follows} == {"egress"} and len(follows) == 2  # each proxy, once
