"""On Kubernetes a turn's sandbox is given the gateway of the replica running the turn, by name."""

from __future__ import annotations

from pathlib import Path

from orchestrator.dsl.connectors import ConnectorSpec, ConnectorType
from orchestrator.gateway.address import GatewayAddress, sandbox_base_url
from orchestrator.gateway.server import ModelGateway
from orchestrator.sandbox.network import NO_PROXY, proxy_env, replica_gateway_url
from orchestrator.settings import Settings


def test_the_replica_url_is_its_pod_dns_name_under_the_headless_service() -> None:
    assert replica_gateway_url("10.244.1.17", 8089) == "http://10-244-1-17.cage-gateway:8089"
    assert replica_gateway_url("fd00::1:7", 9000) == "http://fd00--1-7.cage-gateway:9000"


def test_with_a_pod_ip_every_sandbox_gets_this_replica_and_the_real_port() -> None:
    address = GatewayAddress(host="0.0.0.0", port=9100)
    for isolated in (True, False):
        assert (
            sandbox_base_url(address, isolated=isolated, pod_ip="10.0.3.4")
            == "http://10-0-3-4.cage-gateway:9100"
        )
    assert sandbox_base_url(address, isolated=True) == "http://cage-gateway:8089"  # Docker: the relay


def test_the_replica_names_bypass_the_proxy_in_every_spelling() -> None:
    assert ".cage-gateway" in NO_PROXY and "cage-gateway" in NO_PROXY
    env = proxy_env()
    assert ".cage-gateway" in env["NO_PROXY"].split(",") and env["no_proxy"] == env["NO_PROXY"]


async def test_the_gateway_grants_a_turn_its_own_replica_on_kubernetes(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path, backend="kubernetes", k8s_pod_ip="10.1.2.3", gateway_host="127.0.0.1"
    )
    connector = ConnectorSpec(
        id="c", label="c", type=ConnectorType.ANTHROPIC, model="m", base_url="https://api.example"
    )
    gateway = ModelGateway.from_settings(settings)
    try:
        access = await gateway.grant(
            sandbox="box", owner="o", assistant_id="a", turn_id="t", connector=connector, isolated=True
        )
        address = gateway.address
        assert address is not None and access.connector is not None
        assert access.connector.base_url.startswith(f"http://10-1-2-3.cage-gateway:{address.port}")
        assert access.connector.key.get_secret_value() == access.token
    finally:
        await gateway.aclose()


async def test_the_pod_ip_means_nothing_to_the_docker_backend(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, k8s_pod_ip="10.1.2.3", gateway_host="127.0.0.1")
    connector = ConnectorSpec(
        id="c", label="c", type=ConnectorType.ANTHROPIC, model="m", base_url="https://api.example"
    )
    gateway = ModelGateway.from_settings(settings)
    try:
        access = await gateway.grant(
            sandbox="box", owner="o", assistant_id="a", turn_id="t", connector=connector, isolated=True
        )
        assert access.connector is not None
        assert access.connector.base_url.startswith("http://cage-gateway:8089")
    finally:
        await gateway.aclose()
