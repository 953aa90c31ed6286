"""The egress proxy's log follower: it ends once the proxy container is gone (before, it asked the
engine for it again every second for as long as a sandbox was tracked, and its debug lines flooded
the output of a whole test run after a test removed its proxy); `settle` returns once it has read
the real proxy's log past a request made then, every earlier denial handed over."""

from __future__ import annotations

import ipaddress
import threading
import uuid

import anyio
import docker
import pytest

from orchestrator.sandbox.egress.denials import Denial
from orchestrator.sandbox.network import EgressPolicy
from tests.integration.sandbox.own_proxy import OwnProxy, proxy_answer


def test_the_follower_ends_when_the_proxy_is_gone(own_proxy: OwnProxy) -> None:
    egress = own_proxy.egress  # its proxy never made: "gone" from the start
    egress.denials.track("cage-box-gone", "10.254.0.0/28", "allow")
    assert egress.denials.tracking()
    follower = threading.Thread(target=egress._follow, daemon=True)
    follower.start()
    follower.join(timeout=30)
    assert not follower.is_alive(), "the follower still polls a proxy that does not exist"


async def test_settle_returns_once_the_log_is_read_past_it(
    docker_engine: docker.DockerClient, own_proxy: OwnProxy
) -> None:
    egress, network = own_proxy.egress, own_proxy.settings.egress_network
    box = f"cage-settle-{uuid.uuid4().hex[:8]}"
    try:
        await egress.attach(box, EgressPolicy(mode="none"), gateway=None)  # the proxy, its follower
        await egress.join(box)
        proxy_ip = own_proxy.address(docker_engine.api.inspect_container(own_proxy.name))
        ipam = docker_engine.networks.get(network).attrs["IPAM"]["Config"][0]
        host_ip = ipam.get("Gateway") or str(next(ipaddress.ip_network(ipam["Subnet"]).hosts()))
        hub = egress.denials
        hub.track("host-box", f"{host_ip}/32", "none")  # this host's requests stand for a box's
        with hub.subscribe("host-box") as denials:
            answer = await anyio.to_thread.run_sync(proxy_answer, proxy_ip)  # 192.0.2.7:81
            assert answer.startswith(b"HTTP/1.1 403")
            with anyio.fail_after(60):
                await hub.settle(3600)  # returns on its own line in the log, not after an hour
            assert denials.receive_nowait() == Denial("host-box", "192.0.2.7", 81, "GET")
            with pytest.raises(anyio.WouldBlock):  # settle's own request is no box's denial
                denials.receive_nowait()
    finally:
        await egress.detach(box)
