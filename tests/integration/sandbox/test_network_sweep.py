"""The periodic network sweep removes sandbox networks whose box is gone, but never one young
enough to belong to a box being created right now (its network is made just before the box)."""

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
