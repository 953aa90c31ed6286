"""A box with no network interface (`namespace_egress`), attacked on the real engine.

Such a box has only `lo`; this process serves `cage-egress:3128` and `cage-gateway:8089` on its
loopback from inside its namespace and hands each connection to the proxy's front over a Unix
socket the box never sees, naming the box (`orchestrator/sandbox/docker/netns.py`). Each test
attacks that: the way round it, the sockets, a port the box takes for itself, a process that
adopts the box, a pid that is not the box's.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import anyio
import docker
import pytest

from orchestrator.errors import SandboxError
from orchestrator.sandbox.backend import ExecSpec
from orchestrator.sandbox.docker import DockerBackend, netns
from orchestrator.sandbox.docker.netns import box_namespace
from orchestrator.sandbox.manager import SandboxManager
from orchestrator.settings import Settings
from tests.security import egress_rig
from tests.security.egress_rig import (
    ALLOWED,
    PROBE,
    HostServer,
    acquire,
    probe,
    served_without_interface,
)

pytestmark = [
    pytest.mark.docker,
    pytest.mark.parametrize("egress_settings", ["namespace"], indirect=True),
]
docker_engine, host_server, proxy_name, egress_settings, egress_manager = egress_rig.FIXTURES
SQUAT = "nohup python3 -c 'import socket,time; s=socket.socket(); s.bind((\"127.0.0.1\", 3128)); s.listen(); time.sleep(120)' >/dev/null 2>&1 & sleep 1; echo up"


def backend_of(manager: SandboxManager) -> DockerBackend:
    assert isinstance(manager.backend, DockerBackend)
    return manager.backend


async def probe_with(backend: DockerBackend, ref: Any, *steps: list[Any]) -> dict[str, Any]:
    """The probe, run through `backend` (another process's, say) instead of the manager."""
    spec = ExecSpec(argv=("python3", "-c", PROBE, json.dumps(steps)), user="sandbox")
    async with await backend.exec(ref, spec) as handle:
        lines = [item for item in [i async for i in handle] if isinstance(item, bytes)]
        assert await handle.wait() == 0, (handle.stderr, lines)
    result: dict[str, Any] = json.loads(lines[-1])
    return result


async def test_the_box_has_only_loopback_and_nothing_of_the_proxy(
    egress_manager: SandboxManager,
    host_server: HostServer,
    docker_engine: docker.DockerClient,
    tmp_path: Path,
) -> None:
    port = host_server.port
    lease = await acquire(egress_manager, tmp_path, {"allow": [f"{ALLOWED}:{port}"]})
    assert served_without_interface(docker_engine, lease.identity.name)
    proxy = docker_engine.api.inspect_container(egress_manager.settings.egress_container)
    outside = proxy["NetworkSettings"]["Networks"][egress_manager.settings.egress_network]["IPAddress"]
    out = await probe(
        egress_manager,
        lease,
        ["interfaces", "interfaces"],
        ["abstract", "front_forward", "cage-forward"],
        ["abstract", "front_gateway", "cage-gateway"],
        ["tcp", "proxy_outside", outside, 3128],
        ["dns_query", "outside_dns", "1.1.1.1"],
        ["resolve", "proxy_name", "cage-egress"],
        ["http", "allowed", f"http://{ALLOWED}:{port}/through-the-namespace"],
    )
    assert out["interfaces"] == ["lo"]
    # the front's sockets for such boxes are in the proxy's namespace, not in the box's
    assert out["front_forward"] == out["front_gateway"] == "ConnectionRefusedError"
    assert out["proxy_outside"] == "OSError" and out["outside_dns"] == "OSError"  # unreachable
    assert out["proxy_name"] == "127.0.0.1"
    assert out["allowed"] == [200, "hello /through-the-namespace"]
    await egress_manager.release(lease)


def connects_in(namespace: int, port: int) -> bool:
    """Whether something accepts on `127.0.0.1:port` in network namespace `namespace`."""

    def attempt() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                return True
        except OSError:
            return False

    return netns.inside(namespace, attempt)


async def test_a_removed_box_is_served_no_more(
    egress_manager: SandboxManager, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    """Its listeners close as it goes, before the container (the namespace is held open here to
    look: a listener left behind would keep answering in it)."""
    lease = await acquire(egress_manager, tmp_path, "bridge")
    pid = int(docker_engine.api.inspect_container(lease.ref.id)["State"]["Pid"])
    namespace = box_namespace(pid, lease.ref.id)
    try:
        assert connects_in(namespace, 3128) and connects_in(namespace, 8089)
        await egress_manager.release(lease)  # oneshot: removed
        assert not connects_in(namespace, 3128) and not connects_in(namespace, 8089)
    finally:
        os.close(namespace)
    assert lease.ref.id not in backend_of(egress_manager).egress.served()


async def test_the_box_keeps_its_way_out_when_the_proxy_starts_again(
    egress_manager: SandboxManager,
    host_server: HostServer,
    docker_engine: docker.DockerClient,
    tmp_path: Path,
) -> None:
    """The proxy killed and started again (a new namespace, perhaps under the same pid): the next
    connection of a box already served finds the front in the new namespace."""
    port = host_server.port
    lease = await acquire(egress_manager, tmp_path, {"allow": [f"{ALLOWED}:{port}"]})
    before = await probe(egress_manager, lease, ["http", "a", f"http://{ALLOWED}:{port}/before"])
    assert before["a"] == [200, "hello /before"]
    egress = backend_of(egress_manager).egress
    proxy = egress_manager.settings.egress_container
    docker_engine.api.kill(proxy)
    docker_engine.api.start(proxy)
    await anyio.to_thread.run_sync(egress.proxy.await_listening, proxy)
    after = await probe(egress_manager, lease, ["http", "a", f"http://{ALLOWED}:{port}/after"])
    assert after["a"] == [200, "hello /after"]
    await egress_manager.release(lease)


async def test_a_process_that_adopts_the_box_serves_it_before_its_exec(
    egress_manager: SandboxManager,
    egress_settings: Settings,
    host_server: HostServer,
    tmp_path: Path,
) -> None:
    port = host_server.port
    lease = await acquire(egress_manager, tmp_path, {"allow": [f"{ALLOWED}:{port}"]})
    await backend_of(egress_manager).egress.close_box(lease.identity.name, lease.ref.id)  # "gone"
    adopter = DockerBackend(egress_settings)
    try:
        out = await probe_with(adopter, lease.ref, ["http", "allowed", f"http://{ALLOWED}:{port}/adopted"])
        assert out["allowed"] == [200, "hello /adopted"]
        assert lease.ref.id in adopter.egress.served()
    finally:
        await adopter.egress.close_box(lease.identity.name, lease.ref.id)
        await adopter.aclose()
    await egress_manager.release(lease)


async def test_a_replica_on_the_same_host_uses_a_box_another_one_serves(
    egress_manager: SandboxManager,
    egress_settings: Settings,
    host_server: HostServer,
    tmp_path: Path,
) -> None:
    """Two Cage processes on one engine (replicas): the second runs a turn in a box the first
    serves; the port is held, but by a process outside the box, so the box is served already."""
    port = host_server.port
    lease = await acquire(egress_manager, tmp_path, {"allow": [f"{ALLOWED}:{port}"]})
    replica = DockerBackend(egress_settings)
    try:
        out = await probe_with(replica, lease.ref, ["http", "allowed", f"http://{ALLOWED}:{port}/replica"])
        assert out["allowed"] == [200, "hello /replica"]
        assert lease.ref.id not in replica.egress.served()  # the first process serves it
        assert replica.egress.serving(lease.ref.id)
    finally:
        await replica.aclose()
    await egress_manager.release(lease)


async def test_a_box_that_took_its_port_is_not_served(
    egress_manager: SandboxManager,
    egress_settings: Settings,
    docker_engine: docker.DockerClient,
    tmp_path: Path,
) -> None:
    """While no process served it, the agent bound 127.0.0.1:3128 itself (to read what tools
    send the proxy, say): the next process refuses to serve the box rather than share the port."""
    lease = await acquire(egress_manager, tmp_path, "bridge")
    await backend_of(egress_manager).egress.close_box(lease.identity.name, lease.ref.id)
    # straight through the engine: Cage's own exec would serve the box again first
    made = docker_engine.api.exec_create(lease.ref.id, ["sh", "-c", SQUAT], user="sandbox")
    assert docker_engine.api.exec_start(made["Id"]).strip() == b"up"
    adopter = DockerBackend(egress_settings)
    try:
        with pytest.raises(SandboxError, match="holds the port its way out is served on"):
            await adopter.exec(lease.ref, ExecSpec(argv=("true",)))
        assert lease.ref.id not in adopter.egress.served()
    finally:
        await adopter.aclose()
    await egress_manager.release(lease)


async def test_a_pid_that_is_not_the_box_s_is_never_entered(
    egress_manager: SandboxManager, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    a = await acquire(egress_manager, tmp_path / "a", "none")
    b = await acquire(egress_manager, tmp_path / "b", "none")
    pid_a = int(docker_engine.api.inspect_container(a.ref.id)["State"]["Pid"])
    fd = box_namespace(pid_a, a.ref.id)  # the box's own process: its namespace
    os.close(fd)
    with pytest.raises(OSError, match="is not box"):
        box_namespace(pid_a, b.ref.id)  # A's process named as B's
    with pytest.raises(OSError, match="is not box"):
        box_namespace(os.getpid(), a.ref.id)  # a pid that means this process here
    for lease in (a, b):
        await egress_manager.release(lease)
