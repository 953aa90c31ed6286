"""H8, issue 11 item 6, issue 12 item 2: egress follows `computer.network`, on the real engine.

Each test starts real sandboxes behind this module's own egress proxy and attacks from inside:
names, raw IPs, the host, cloud metadata, other sandboxes, outside DNS. The host's side (what its
server was asked for) is checked after every attempt.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import anyio
import docker
import pytest

from orchestrator.sandbox.backend import ExecSpec
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.egress.denials import Denial
from orchestrator.sandbox.manager import SandboxManager
from tests.security import egress_rig
from tests.security.egress_rig import (
    ALLOWED,
    DENIED,
    HostServer,
    acquire,
    container_ip,
    probe,
    served_without_interface,
    url_host,
)

pytestmark = [pytest.mark.docker]
docker_engine, host_server, proxy_name, egress_settings, egress_manager = egress_rig.FIXTURES


def host_gateway(engine: docker.DockerClient) -> str:
    ipam = engine.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return str(ipam.get("Gateway") or next(ipaddress.ip_network(ipam["Subnet"]).hosts()))


def family(ip: str) -> str:
    return "TCP6" if ":" in ip else "TCP4"


def denials_of(manager: SandboxManager) -> DockerBackend:
    assert isinstance(manager.backend, DockerBackend)
    return manager.backend


async def test_an_allowlist_reaches_its_names_and_nothing_else(
    egress_manager: SandboxManager,
    host_server: HostServer,
    docker_engine: docker.DockerClient,
    tmp_path: Path,
) -> None:
    port, host_ip = host_server.port, host_gateway(docker_engine)
    before = len(host_server.paths)
    lease = await acquire(egress_manager, tmp_path, {"allow": [f"{ALLOWED}:{port}"]})
    hub = denials_of(egress_manager).egress.denials
    with hub.subscribe(lease.identity.name) as denials:
        out = await probe(
            egress_manager,
            lease,
            ["http", "allowed", f"http://{ALLOWED}:{port}/allowed"],
            ["http", "other_port", f"http://{ALLOWED}:{port + 1}/other-port"],
            ["http", "denied", f"http://{DENIED}:{port}/denied"],
            ["http", "raw_ip", f"http://{host_ip}:{port}/raw-ip"],
            ["http", "direct", f"http://{host_ip}:{port}/direct", False],
            ["tcp", "direct_tcp", host_ip, port],
            ["resolve", "own_dns", "pypi.org"],
            ["resolve", "host_alias", "host.docker.internal"],
            ["dns_query", "outside_dns", "1.1.1.1"],
            ["dns_query", "host_dns", host_ip],
        )
        with anyio.fail_after(5):
            got = [await denials.receive() for _ in range(3)]
    assert out["allowed"] == [200, "hello /allowed"]
    assert out["other_port"][0] == 403 and out["denied"][0] == 403 and out["raw_ip"][0] == 403
    assert out["direct"][0] == "error" and out["direct_tcp"] != "connected"
    assert out["own_dns"] in ("gaierror", "herror") and out["host_alias"] in ("gaierror", "herror")
    assert out["outside_dns"] != "answered" and out["host_dns"] != "answered"
    assert host_server.paths[before:] == ["/allowed"]  # the host saw the allowed request only
    name = lease.identity.name
    assert set(got) == {
        Denial(sandbox=name, host=ALLOWED, port=port + 1, method="GET"),
        Denial(sandbox=name, host=DENIED, port=port, method="GET"),
        Denial(sandbox=name, host=host_ip, port=port, method="GET"),
    }
    await egress_manager.release(lease)


async def test_bridge_reaches_no_private_range_metadata_or_host(
    egress_manager: SandboxManager,
    host_server: HostServer,
    docker_engine: docker.DockerClient,
    tmp_path: Path,
) -> None:
    port, host_ip = host_server.port, host_gateway(docker_engine)
    before = len(host_server.paths)
    lease = await acquire(egress_manager, tmp_path, "bridge")
    out = await probe(
        egress_manager,
        lease,
        ["http", "host_gateway", f"http://{host_ip}:{port}/host"],
        ["http", "private_name", f"http://{ALLOWED}:{port}/private-name"],  # resolves to the host
        ["http", "metadata", "http://169.254.169.254/latest/meta-data/"],
        ["http", "loopback", "http://127.0.0.2:3128/"],  # 127.0.0.1 is in no_proxy
        ["http", "mapped", f"http://[::ffff:{host_ip}]:{port}/mapped"],
        ["http", "direct", f"http://{host_ip}:{port}/direct", False],
        ["tcp", "metadata_tcp", "169.254.169.254", 80],
    )
    for key in ("host_gateway", "private_name", "metadata", "loopback", "mapped"):
        assert out[key][0] == 403, (key, out[key])
    assert out["direct"][0] == "error" and out["metadata_tcp"] != "connected"
    assert host_server.paths[before:] == []
    await egress_manager.release(lease)


async def test_none_reaches_only_the_model_gateway(
    egress_manager: SandboxManager,
    host_server: HostServer,
    docker_engine: docker.DockerClient,
    tmp_path: Path,
) -> None:
    port, host_ip = host_server.port, host_gateway(docker_engine)
    before = len(host_server.paths)
    # the host server stands in for the model gateway: the relay forwards cage-gateway:8089 to it
    lease = await acquire(egress_manager, tmp_path, "none", gateway_port=port)
    out = await probe(
        egress_manager,
        lease,
        ["http", "gateway", "http://cage-gateway:8089/v1/models", False],
        ["http", "allowed", f"http://{ALLOWED}:{port}/through-proxy"],
        ["http", "public", "http://example.com/"],
        ["http", "direct", f"http://{host_ip}:{port}/direct", False],
    )
    assert out["gateway"] == [200, "hello /v1/models"]
    assert out["allowed"][0] == 403 and out["public"][0] == 403 and out["direct"][0] == "error"
    assert host_server.paths[before:] == ["/v1/models"]
    await egress_manager.release(lease)


async def test_one_sandbox_cannot_reach_another(
    egress_manager: SandboxManager, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    a = await acquire(egress_manager, tmp_path / "a", "bridge")
    serve = "nohup python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 & sleep 1; echo up"
    async with await egress_manager.exec(a, ExecSpec(argv=("sh", "-c", serve))) as handle:
        assert await handle.wait() == 0
    a_ip = container_ip(docker_engine, a.identity.name)
    own = await probe(egress_manager, a, ["tcp", "own", "127.0.0.1", 8000])
    assert own["own"] == "connected"  # the server really runs
    # B's own allowlist even names A's address: the proxy still refuses every sandbox subnet
    b = await acquire(egress_manager, tmp_path / "b", {"allow": [a_ip, a.identity.name]})
    out = await probe(
        egress_manager,
        b,
        ["tcp", "direct", a_ip, 8000],
        ["http", "by_ip", f"http://{url_host(a_ip)}:8000/"],
        ["http", "by_name", f"http://{a.identity.name}:8000/"],
        ["http", "proxy_host", "http://cage-egress:8000/"],
    )
    assert out["direct"] != "connected"
    assert out["by_ip"][0] == 403 and out["proxy_host"][0] == 403
    # on a network, A's name is its address there (refused); a box with no interface has no
    # address to resolve its name to anywhere (squid cannot connect: 502)
    assert out["by_name"][0] == (502 if served_without_interface(docker_engine, a.identity.name) else 403)
    await egress_manager.release(a)
    await egress_manager.release(b)


async def test_a_sandbox_cannot_pass_for_another_with_a_proxy_protocol_header(
    egress_manager: SandboxManager,
    host_server: HostServer,
    docker_engine: docker.DockerClient,
    tmp_path: Path,
) -> None:
    """The proxy's front tells squid each connection's address in a PROXY protocol header; a box
    that writes one itself, naming a box whose allowlist has the host, still gets nothing, and
    squid's own ports behind the front are out of reach."""
    port = host_server.port
    a = await acquire(egress_manager, tmp_path / "a", {"allow": [f"{ALLOWED}:{port}"]})
    b = await acquire(egress_manager, tmp_path / "b", "none")
    a_ip = container_ip(docker_engine, a.identity.name)
    before = len(host_server.paths)
    request = f"GET http://{ALLOWED}:{port}/spoofed HTTP/1.0\r\n\r\n"
    out = await probe(
        egress_manager,
        b,
        ["raw", "as_a", "cage-egress", 3128, f"PROXY {family(a_ip)} {a_ip} {a_ip} 40000 3128\r\n{request}"],
        ["raw", "as_b", "cage-egress", 3128, request],
        ["tcp", "squid_forward", "cage-egress", 13128],
        ["tcp", "squid_gateway", "cage-egress", 18089],
    )
    assert out["as_b"].startswith("HTTP/1.1 403"), out
    assert out["as_a"].split()[1] in {"400", "403"}, out  # a malformed request of B's, never A's
    assert out["squid_forward"] != "connected" and out["squid_gateway"] != "connected", out
    assert host_server.paths[before:] == []
    reached = await probe(egress_manager, a, ["http", "a", f"http://{ALLOWED}:{port}/a"])
    assert reached["a"] == [200, "hello /a"]  # what B asked for was A's to have
    await egress_manager.release(a)
    await egress_manager.release(b)


async def test_a_sandbox_that_starts_never_cuts_another_off(
    egress_manager: SandboxManager, tmp_path: Path
) -> None:
    """Each box that starts reconfigures squid, which closes its ports meanwhile (tens of ms); the
    proxy's front keeps accepting and retries, so a box already running is never refused, whoever
    starts boxes beside it. (Without the front, four starts refused a box probing like this 33 times
    at one connection every 2 ms, 5 to 7 times at one every 10 ms, as here.) A connection squid had
    queued as it closed its port is reset, which the front cannot retry: one in thousands. The
    probe has one connection open at a time, so a start can reset at most the one in flight: the
    bound is per start, not a share of the attempts (a loaded CI machine's 95 attempts met one
    reset, which a 1% share refused).

    The box probes from a second before the first start until the last box is gone, however long
    the starts take on the machine at hand (a loaded CI machine made about 40 attempts a second,
    a quiet one 80)."""
    a = await acquire(egress_manager, tmp_path / "a", "bridge")
    stop, starts = "/tmp/stop-hammer", 4
    result: dict[str, dict[str, int]] = {}

    async def hammer() -> None:
        result.update(await probe(egress_manager, a, ["hammer", "a", stop, 120.0]))

    async with anyio.create_task_group() as tg:
        tg.start_soon(hammer)
        await anyio.sleep(1.0)
        for index in range(starts):
            other = await acquire(egress_manager, tmp_path / f"other-{index}", "none")
            await egress_manager.release(other)
        async with await egress_manager.exec(a, ExecSpec(argv=("touch", stop))) as handle:
            assert await handle.wait() == 0
    counts = result["a"]
    attempts = sum(counts.values())
    assert counts.get("answered", 0) >= 50, counts  # it probed through the starts, not once
    assert set(counts) <= {"answered", "closed", "ConnectionResetError"}, counts  # none refused
    assert attempts - counts["answered"] <= starts, counts  # a reset: the one queued, per start
    await egress_manager.release(a)


async def test_a_removed_sandbox_leaves_no_network(
    egress_manager: SandboxManager, docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    """The box's network carries the box's labels (what finds one by label finds the other: a
    `cage run`'s id, a test run's label), and goes with the box."""
    lease = await acquire(egress_manager, tmp_path, "bridge")
    name = f"{lease.identity.name}-net"
    if served_without_interface(docker_engine, lease.identity.name):  # nothing to leave behind
        assert not docker_engine.networks.list(names=[name])
        backend = denials_of(egress_manager)
        assert lease.ref.id in backend.egress.served()
        await egress_manager.release(lease)
        assert lease.ref.id not in backend.egress.served()
        return
    network = docker_engine.api.inspect_network(name)
    assert network["Internal"] is True
    box_labels = dict(lease.ref.labels)  # what Cage put on the box (the image adds its own)
    assert box_labels and box_labels.items() <= network["Labels"].items()
    assert network["Labels"]["cage.egress.sandbox"] == lease.identity.name
    await egress_manager.release(lease)  # oneshot: removed
    assert not docker_engine.networks.list(names=[name])
