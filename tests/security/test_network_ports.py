"""Issue 11 item 6: a box that publishes `computer.ports` is isolated like every other box.

Its ports are published on the host's 127.0.0.1 by a relay container beside it; the box itself
stays on its own internal network behind the egress proxy. Each test serves HTTP from inside a real
box, reaches it from the host, attacks from inside (the host, metadata, another box, the relay) and
checks the host's side and the engine's state after.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import anyio
import docker
import pytest

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.errors import SandboxError
from orchestrator.sandbox.backend import ExecSpec
from orchestrator.sandbox.docker.ports import relay_name
from orchestrator.sandbox.manager import SandboxLease, SandboxManager, SandboxRequest
from tests.security import egress_rig
from tests.security.egress_rig import (
    ALLOWED,
    HostServer,
    acquire,
    container_ip,
    probe,
    served_without_interface,
    url_host,
)
from tests.serving import reserve_port

pytestmark = [pytest.mark.docker]
docker_engine, host_server, proxy_name, egress_settings, egress_manager = egress_rig.FIXTURES

SERVE = (
    "mkdir -p /tmp/www && echo inside > /tmp/www/index.html && cd /tmp/www && "
    "nohup python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 & sleep 1; echo up"
)


def host_gateway(engine: docker.DockerClient) -> str:
    ipam = engine.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return str(ipam.get("Gateway") or next(ipaddress.ip_network(ipam["Subnet"]).hosts()))


async def acquire_ported(
    manager: SandboxManager,
    tmp_path: Path,
    network: Any,
    ports: list[Any],
    *,
    gateway_port: int | None = None,
) -> SandboxLease:
    spec = SandboxSpec.model_validate(
        {
            "version": "2.0",
            "runner": {"name": "yaocode"},
            "computer": {"network": network, "ports": ports},
            "lifecycle": "oneshot",
        }
    )
    request = SandboxRequest(
        owner="sec",
        assistant_id=f"tests.ports-{uuid.uuid4().hex[:6]}",
        assistant_dir=tmp_path,
        spec=spec,
        gateway_port=gateway_port,
    )
    return await manager.acquire(request)


async def serve(manager: SandboxManager, lease: SandboxLease) -> None:
    async with await manager.exec(lease, ExecSpec(argv=("sh", "-c", SERVE))) as handle:
        assert await handle.wait() == 0


def published(engine: docker.DockerClient, sandbox: str, port: str = "8000/tcp") -> tuple[str, int]:
    (binding,) = engine.api.inspect_container(relay_name(sandbox))["NetworkSettings"]["Ports"][port]
    return str(binding["HostIp"]), int(binding["HostPort"])


def fetch(port: int) -> tuple[int, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
        return int(response.status), response.read().decode().strip()


async def test_a_published_port_serves_the_host_and_the_box_stays_isolated(
    egress_manager: SandboxManager,
    host_server: HostServer,
    docker_engine: docker.DockerClient,
    tmp_path: Path,
) -> None:
    port, host_ip = host_server.port, host_gateway(docker_engine)
    before = len(host_server.paths)
    lease = await acquire_ported(egress_manager, tmp_path, "bridge", [8000])
    name = lease.identity.name
    await serve(egress_manager, lease)
    bind_ip, host_port = published(docker_engine, name)
    assert bind_ip == "127.0.0.1"
    assert await anyio.to_thread.run_sync(fetch, host_port) == (200, "inside")
    # the box: on its own internal network, published nothing itself, no host alias
    box = docker_engine.api.inspect_container(name)
    assert set(box["NetworkSettings"]["Networks"]) == {f"{name}-net"}
    assert not box["HostConfig"]["PortBindings"] and not box["HostConfig"]["ExtraHosts"]
    assert docker_engine.api.inspect_network(f"{name}-net")["Internal"] is True
    # the relay: unprivileged, no capabilities, no IP forwarding
    relay = docker_engine.api.inspect_container(relay_name(name))
    assert relay["Config"]["User"] == "proxy" and relay["HostConfig"]["CapDrop"] == ["ALL"]
    assert relay["HostConfig"]["Sysctls"]["net.ipv4.ip_forward"] == "0"
    assert relay["HostConfig"]["ReadonlyRootfs"] is True
    relay_outside = relay["NetworkSettings"]["Networks"][egress_manager.settings.egress_network]["IPAddress"]
    relay_inside = relay["NetworkSettings"]["Networks"][f"{name}-net"]["IPAddress"]
    out = await probe(
        egress_manager,
        lease,
        ["http", "host_gateway", f"http://{host_ip}:{port}/host"],
        ["http", "private_name", f"http://{ALLOWED}:{port}/private-name"],
        ["http", "metadata", "http://169.254.169.254/latest/meta-data/"],
        ["http", "direct", f"http://{host_ip}:{port}/direct", False],
        ["tcp", "direct_tcp", host_ip, port],
        ["tcp", "metadata_tcp", "169.254.169.254", 80],
        ["tcp", "relay_outside", relay_outside, 8000],
        ["resolve", "host_alias", "host.docker.internal"],
        ["tcp", "own_relay", relay_inside, 8000],  # the relay only forwards back to the box itself
    )
    for key in ("host_gateway", "private_name", "metadata"):
        assert out[key][0] == 403, (key, out[key])
    assert out["direct"][0] == "error" and out["direct_tcp"] != "connected"
    assert out["metadata_tcp"] != "connected" and out["relay_outside"] != "connected"
    assert out["host_alias"] in ("gaierror", "herror")
    assert out["own_relay"] == "connected"
    assert host_server.paths[before:] == []  # the host saw nothing from the box
    await egress_manager.release(lease)  # oneshot: removed, with its relay and network
    assert not docker_engine.containers.list(all=True, filters={"name": relay_name(name)})
    assert not docker_engine.networks.list(names=[f"{name}-net"])
    with pytest.raises(OSError):
        await anyio.to_thread.run_sync(fetch, host_port)


async def test_a_fixed_host_port_is_kept_and_none_publishes_nothing(
    egress_manager: SandboxManager, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    fixed = reserve_port()  # Docker binds it with SO_REUSEADDR
    lease = await acquire_ported(
        egress_manager, tmp_path / "fixed", "bridge", [{"port": 8000, "host_port": fixed}]
    )
    await serve(egress_manager, lease)
    assert published(docker_engine, lease.identity.name) == ("127.0.0.1", fixed)
    assert await anyio.to_thread.run_sync(fetch, fixed) == (200, "inside")
    # `none` never published ports (the box had no network to publish from): still no relay
    quiet = await acquire_ported(egress_manager, tmp_path / "none", "none", [8000])
    if served_without_interface(docker_engine, quiet.identity.name):
        assert not docker_engine.networks.list(names=[f"{quiet.identity.name}-net"])
    else:
        assert docker_engine.api.inspect_network(f"{quiet.identity.name}-net")["Internal"] is True
    assert not docker_engine.containers.list(all=True, filters={"name": relay_name(quiet.identity.name)})
    for each in (lease, quiet):
        await egress_manager.release(each)
    assert not docker_engine.containers.list(all=True, filters={"name": relay_name(lease.identity.name)})


async def test_a_box_with_ports_cannot_reach_another_box(
    egress_manager: SandboxManager, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    other = await acquire(egress_manager, tmp_path / "other", "bridge")
    await serve(egress_manager, other)
    other_ip = container_ip(docker_engine, other.identity.name)
    ported = await acquire_ported(egress_manager, tmp_path / "ported", "bridge", [8000])
    await serve(egress_manager, ported)
    out = await probe(
        egress_manager,
        ported,
        ["tcp", "direct", other_ip, 8000],
        ["http", "by_ip", f"http://{url_host(other_ip)}:8000/"],
        ["http", "by_name", f"http://{other.identity.name}:8000/"],
        ["resolve", "name", other.identity.name],
    )
    # a box with no interface has no address its name could resolve to (squid cannot connect),
    # and the address the proxy knows it by is IPv6, which squid cannot even try without IPv6
    without = served_without_interface(docker_engine, other.identity.name)
    unreached = (403, 502, "error") if without else (403,)  # "error": squid still trying in vain
    assert out["direct"] != "connected" and out["by_name"][0] in unreached and out["by_ip"][0] in unreached, (
        out
    )
    assert out["name"] in ("gaierror", "herror")
    # nor the other way round: the other box cannot reach the ported one or its relay
    relay = docker_engine.api.inspect_container(relay_name(ported.identity.name))
    targets = [container_ip(docker_engine, ported.identity.name)]
    targets += [n["IPAddress"] for n in relay["NetworkSettings"]["Networks"].values()]
    back = await probe(egress_manager, other, *[["tcp", f"t{i}", ip, 8000] for i, ip in enumerate(targets)])
    assert all(value != "connected" for value in back.values()), back
    for lease in (other, ported):
        await egress_manager.release(lease)


async def test_a_taken_host_port_fails_the_box_and_leaves_nothing(
    egress_manager: SandboxManager, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        with pytest.raises(SandboxError) as caught:
            await acquire_ported(egress_manager, tmp_path, "bridge", [{"port": 8000, "host_port": port}])
    found = re.search(r"(cage-\S+)-ports", str(caught.value))  # the error names the refused relay
    assert found is not None, str(caught.value)
    name = found.group(1)
    for gone in (name, relay_name(name)):
        assert not docker_engine.containers.list(all=True, filters={"name": f"^{gone}$"})
    assert not docker_engine.networks.list(names=[f"{name}-net"])
