"""The egress proxy's log follower: it ends once the proxy container is gone (before, it asked the
engine for it again every second for as long as a sandbox was tracked, and its debug lines flooded
the output of a whole test run after a test removed its proxy); `settle` returns once it has read
the real proxy's log past a request made then, every earlier denial handed over."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import uuid
from pathlib import Path

import anyio
import docker
import docker.errors
import pytest

from orchestrator.sandbox.docker.egress import DockerEgress
from orchestrator.sandbox.egress.denials import Denial
from orchestrator.sandbox.network import PROXY_PORT, EgressPolicy
from orchestrator.settings import Settings


def test_the_follower_ends_when_the_proxy_is_gone(docker_engine: docker.DockerClient, tmp_path: Path) -> None:
    proxy = f"cage-egress-gone-{uuid.uuid4().hex[:8]}"
    settings = Settings(data_dir=tmp_path / "cage", egress_container=proxy)
    egress = DockerEgress(lambda: docker_engine.api, settings)
    egress.denials.track("cage-box-gone", "10.254.0.0/28", "allow")
    assert egress.denials.tracking()
    follower = threading.Thread(target=egress._follow, daemon=True)
    follower.start()
    follower.join(timeout=30)
    assert not follower.is_alive(), "the follower still polls a proxy that does not exist"


def _refused(proxy_ip: str, url: str) -> bytes:
    """The proxy's answer to a request for `url` from this host (no policy names it: refused)."""
    with socket.create_connection((proxy_ip, PROXY_PORT), timeout=10) as conn:
        conn.sendall(f"GET {url} HTTP/1.0\r\n\r\n".encode())
        return b"".join(iter(lambda: conn.recv(4096), b""))


async def test_settle_returns_once_the_log_is_read_past_it(
    docker_engine: docker.DockerClient, tmp_path: Path
) -> None:
    proxy = f"cage-egress-settle-{uuid.uuid4().hex[:8]}"
    settings = Settings(data_dir=tmp_path / "cage", egress_container=proxy)
    egress = DockerEgress(lambda: docker_engine.api, settings)
    box = f"cage-settle-{uuid.uuid4().hex[:8]}"
    try:
        await egress.attach(box, EgressPolicy(mode="none"), gateway=None)  # the proxy, its follower
        await egress.join(box)
        info = docker_engine.api.inspect_container(proxy)
        proxy_ip = info["NetworkSettings"]["Networks"][settings.egress_network]["IPAddress"]
        ipam = docker_engine.networks.get(settings.egress_network).attrs["IPAM"]["Config"][0]
        host_ip = ipam.get("Gateway") or str(next(ipaddress.ip_network(ipam["Subnet"]).hosts()))
        hub = egress.denials
        hub.track("host-box", f"{host_ip}/32", "none")  # this host's requests stand for a box's
        with hub.subscribe("host-box") as denials:
            # an address, not a name: the proxy refuses it without a lookup (this host may have no DNS)
            answer = await anyio.to_thread.run_sync(_refused, proxy_ip, "http://192.0.2.7:81/")
            assert answer.startswith(b"HTTP/1.1 403")
            with anyio.fail_after(60):
                await hub.settle(3600)  # returns on its own line in the log, not after an hour
            assert denials.receive_nowait() == Denial("host-box", "192.0.2.7", 81, "GET")
            with pytest.raises(anyio.WouldBlock):  # settle's own request is no box's denial
                denials.receive_nowait()
    finally:
        await egress.detach(box)
        with contextlib.suppress(docker.errors.NotFound):
            docker_engine.api.remove_container(proxy, force=True)
