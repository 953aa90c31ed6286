"""The periodic network sweep removes sandbox networks whose box is gone, but never one young
enough to belong to a box being created right now (its network is made just before the box).

Both tests sweep with no age guard, which removes every box-less network on the engine, another
worker's in the making too (the egress tests attach networks for boxes they never create): they
run alone, in the serial pass."""

from __future__ import annotations

import uuid

import docker
import pytest

from orchestrator.sandbox.docker import egress
from orchestrator.sandbox.manager import SandboxManager


def _orphan(engine: docker.DockerClient, labels: dict[str, str]) -> str:
    box = f"cage-sweep-{uuid.uuid4().hex[:12]}"
    network = engine.networks.create(
        egress.network_name(box),
        internal=True,
        labels={**labels, "cage.managed": "true", egress.EGRESS_LABEL: "network", egress.SANDBOX_LABEL: box},
    )
    return str(network.name)


@pytest.mark.serial
async def test_a_young_orphan_network_is_kept_an_old_one_removed(
    manager: SandboxManager,
    docker_engine: docker.DockerClient,
    test_run_labels: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = _orphan(docker_engine, test_run_labels)
    try:
        assert name not in await manager.backend.sweep_networks()
        assert docker_engine.networks.list(names=[name])  # still there: it may be a box's in the making

        monkeypatch.setattr(egress, "SWEEP_MIN_AGE", -1.0)
        assert name in await manager.backend.sweep_networks()
        assert not docker_engine.networks.list(names=[name])
    finally:
        for network in docker_engine.networks.list(names=[name]):
            network.remove()


@pytest.mark.serial
async def test_a_network_naming_no_box_is_neither_swept_nor_served(
    manager: SandboxManager,
    docker_engine: docker.DockerClient,
    test_run_labels: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An egress-labelled network that `attach` did not make (no box named in it: another tool's,
    a hand-made one) is not the sweep's to remove, nor a sandbox's for the proxy to serve; the
    sweep goes on past it (once it stopped the whole sweep, asking the engine for a box named "")."""
    foreign = docker_engine.networks.create(
        f"cage-foreign-{uuid.uuid4().hex[:12]}",
        internal=True,
        labels={**test_run_labels, "cage.managed": "true", egress.EGRESS_LABEL: "network"},
    )
    orphan = _orphan(docker_engine, test_run_labels)
    try:
        monkeypatch.setattr(egress, "SWEEP_MIN_AGE", -1.0)
        swept = await manager.backend.sweep_networks()
        assert orphan in swept and foreign.name not in swept
        assert docker_engine.networks.list(names=[foreign.name])
        proxy = egress.DockerEgress(lambda: docker_engine.api, manager.settings)
        assert foreign.name not in [net.name for net in proxy._sandbox_nets()]
    finally:
        for network in docker_engine.networks.list(names=[foreign.name, orphan]):
            network.remove()
