"""What `open_services` (and `Services.aclose`) opens it closes: the sandbox backend's and the
image builder's engine clients."""

from __future__ import annotations

from pathlib import Path

import docker

from orchestrator.dsl import AppLoader
from orchestrator.gateway import ModelGateway
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.manager import SandboxManager
from orchestrator.services import Services
from orchestrator.settings import Settings
from tests.unit.sandbox.fakes import FakeBackend, FakeImageBuilder

UNREACHABLE = "tcp://127.0.0.1:9"


def _settings(tmp_path: Path) -> Settings:
    return Settings(app_dir=tmp_path, data_dir=tmp_path / "data", docker_host=UNREACHABLE)


async def test_services_close_the_backend_and_the_image_builder(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    backend, images = FakeBackend(), FakeImageBuilder()
    services = Services(
        settings=settings,
        loader=AppLoader(tmp_path, environ={}),
        backend=backend,
        images=images,
        manager=SandboxManager(backend, images, settings),
        gateway=ModelGateway.from_settings(settings),
    )
    await services.aclose()
    assert backend.closed and images.closed


async def test_the_docker_backend_closes_its_client_and_opens_a_new_one_when_used_again(
    tmp_path: Path,
) -> None:
    opened: list[docker.APIClient] = []

    def connect() -> docker.APIClient:
        opened.append(docker.APIClient(base_url=UNREACHABLE, version="1.41"))
        return opened[-1]

    backend = DockerBackend(_settings(tmp_path), client_factory=connect)
    await backend.aclose()  # nothing opened yet: nothing to close
    assert opened == []
    first = backend._api()
    await backend.aclose()
    assert backend._api() is not first and len(opened) == 2
    await backend.aclose()
