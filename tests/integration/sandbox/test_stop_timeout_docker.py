"""`stop_timeout` on a real engine: the box is created with it as its stop grace (what the engine
and the reaper give it between SIGTERM and SIGKILL), and the reaper's stop leaves it stopped."""

from __future__ import annotations

import uuid
from pathlib import Path

import docker

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.sandbox.manager import SandboxManager, SandboxRequest
from orchestrator.sandbox.reaper import ReapAction, Reaper


async def test_the_box_stops_with_its_stop_timeout(
    manager: SandboxManager, tmp_path: Path, docker_engine: docker.DockerClient
) -> None:
    spec = SandboxSpec.model_validate(
        {
            "version": "2.0",
            "runner": {"name": "claude"},
            "lifecycle": "longrunning",
            "idle_timeout": "1s",
            "stop_timeout": "13s",
        }
    )
    req = SandboxRequest(
        owner=f"o{uuid.uuid4().hex[:8]}", assistant_id="tests.stop", assistant_dir=tmp_path, spec=spec
    )
    lease = await manager.acquire(req)
    container = docker_engine.containers.get(lease.ref.id)
    assert container.attrs["Config"]["StopTimeout"] == 13
    assert container.labels["cage.stop-timeout"] == "13"
    await manager.release(lease)
    box = manager.registry.get(lease.ref.name)
    assert box is not None and box.stop_timeout == 13.0
    box.last_used -= 5  # idle past its idle_timeout, without waiting
    assert await Reaper(manager).sweep() == [(lease.ref.name, ReapAction.STOP)]
    container.reload()
    assert container.status == "exited"
