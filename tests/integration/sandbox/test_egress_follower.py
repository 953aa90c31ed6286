"""The egress proxy's log follower ends once the proxy container is gone: before, it asked the
engine for it again every second for as long as a sandbox was tracked, and its debug lines flooded
the output of a whole test run after a test removed its proxy."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import docker

from orchestrator.sandbox.docker.egress import DockerEgress
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
