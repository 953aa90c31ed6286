"""Fixtures for sandbox integration tests: a real DockerBackend, a running box, a manager."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from orchestrator.sandbox.backend import CreateSpec, SandboxRef, VolumeMount
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.docker.egress import DockerEgress
from orchestrator.sandbox.limits import MAIN_COMMAND
from orchestrator.sandbox.manager import SandboxManager
from orchestrator.settings import Settings
from tests.integration.sandbox.own_proxy import OwnProxy
from tests.unit.sandbox.fakes import FakeImageBuilder


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "cage", reaper_interval=0.2, max_sandboxes=50, max_sandboxes_per_owner=20
    )


@pytest.fixture
def backend(docker_engine: docker.DockerClient, settings: Settings) -> DockerBackend:
    return DockerBackend(settings)


@pytest.fixture
async def box(
    backend: DockerBackend, sandbox_image: str, test_run_labels: dict[str, str]
) -> AsyncIterator[SandboxRef]:
    """A running hardened container with a fresh workspace volume, removed afterwards."""
    name = f"cage-it-{uuid.uuid4().hex[:10]}"
    await backend.ensure_volume(f"{name}-ws", test_run_labels)
    ref = await backend.create(
        CreateSpec(
            image=sandbox_image,
            name=name,
            command=MAIN_COMMAND,
            labels=test_run_labels,
            user="sandbox",
            workdir="/workspace",
            mounts=(VolumeMount(source=f"{name}-ws", target="/workspace", owner=(1000, 1000)),),
            cap_drop=("ALL",),
            security_opt=("no-new-privileges:true",),
        )
    )
    await backend.start(ref)
    yield ref
    await backend.remove(ref, force=True)
    await backend.remove_volume(f"{name}-ws")


@pytest.fixture
def own_proxy(docker_engine: docker.DockerClient, tmp_path: Path) -> Iterator[OwnProxy]:
    """An egress proxy of this test's own (made on first use), its container removed afterwards."""
    name = f"cage-egress-{uuid.uuid4().hex[:8]}"
    settings = Settings(data_dir=tmp_path / "cage", egress_container=name)
    yield OwnProxy(name, settings, DockerEgress(lambda: docker_engine.api, settings))
    with contextlib.suppress(docker.errors.NotFound):
        docker_engine.api.remove_container(name, force=True)


@pytest.fixture
def images(sandbox_image: str) -> FakeImageBuilder:
    return FakeImageBuilder(tag=sandbox_image)


@pytest.fixture
def case_labels(test_run_labels: dict[str, str]) -> dict[str, str]:
    """The test-run label plus one per test, so reconcile only sees this test's boxes."""
    return {**test_run_labels, "cage.test-case": uuid.uuid4().hex[:12]}


@pytest.fixture
async def manager(
    backend: DockerBackend, images: FakeImageBuilder, settings: Settings, case_labels: dict[str, str]
) -> AsyncIterator[SandboxManager]:
    """A manager labelling everything with `case_labels`; removes this test's boxes afterwards."""
    yield SandboxManager(backend, images, settings, extra_labels=case_labels)
    for ref in await backend.find(case_labels):
        await backend.remove(ref, force=True)
