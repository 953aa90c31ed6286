"""What `open_services` opens it closes, however the block ends: the turn pipeline (it takes no
more turns), the store, and the sandbox backend's and the image builder's engine clients."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from orchestrator.errors import Conflict, UsageError
from orchestrator.pipeline import InputMessage, TurnInput
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.services import open_services
from orchestrator.settings import Settings
from tests.unit.sandbox.fakes import FakeBackend, FakeImageBuilder

UNREACHABLE = "tcp://127.0.0.1:9"


def _settings(tmp_path: Path) -> Settings:
    return Settings(app_dir=tmp_path, data_dir=tmp_path / "data", docker_host=UNREACHABLE)


def _turn() -> TurnInput:
    return TurnInput(
        assistant_id="a.b", owner="alice", session_id="c1", messages=(InputMessage(content="hi"),)
    )


async def test_services_close_the_backend_and_the_image_builder(tmp_path: Path) -> None:
    backend, images = FakeBackend(), FakeImageBuilder()
    async with open_services(_settings(tmp_path), engine=(backend, images)) as services:
        await services.store.migrate()
        assert services.manager.backend is backend and not backend.closed
    assert backend.closed and images.closed
    with pytest.raises(Conflict, match="shutting down"):
        await services.turns.start(_turn())


async def test_services_close_when_the_block_raises(tmp_path: Path) -> None:
    backend, images = FakeBackend(), FakeImageBuilder()
    with pytest.raises(UsageError, match="the caller's own error"):
        async with open_services(_settings(tmp_path), engine=(backend, images)):
            raise UsageError("the caller's own error")  # comes out as raised, not in a group
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
