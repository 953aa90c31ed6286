"""Pipeline end to end: the `PipelineService` on the real Docker backend, a SQLite store, the real
agent CLIs in their runner images talking to the fake model server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import docker
import pytest
from anyio.abc import TaskGroup

from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.settings import Settings
from orchestrator.store import Store
from tests.fakes.assistants import make_app, write_connector
from tests.fakes.model_server import FakeModelServer
from tests.pipeline_rig import Rig

_CA = Path("/etc/ssl/certs/ca-certificates.crt")
HOST_CA = _CA if _CA.is_file() else None
KEY = "sk-fake-pipeline-e2e-key-0042"


@pytest.fixture(scope="session")
def model_server(docker_engine: docker.DockerClient) -> Iterator[FakeModelServer]:
    with FakeModelServer("hello", host="0.0.0.0") as server:
        yield server


@pytest.fixture
async def e2e(
    tmp_path: Path,
    model_server: FakeModelServer,
    test_run_labels: dict[str, str],
    docker_engine: docker.DockerClient,
    turn_tasks: TaskGroup,
) -> AsyncIterator[Rig]:
    root = make_app(tmp_path / "app")
    write_connector(
        root,
        "fake-anthropic",
        kind="anthropic",
        model="claude-sonnet-4-5@hello",
        host=model_server.url,
        key_env="FAKE_KEY",
    )
    write_connector(
        root,
        "fake-slow",
        kind="anthropic",
        model="claude-sonnet-4-5@slow-tool",
        host=model_server.url,
        key_env="FAKE_KEY",
    )
    settings = Settings(
        app_dir=root,
        data_dir=tmp_path / "data",
        sandbox_labels=test_run_labels,
        extra_ca_certs=HOST_CA,
    )
    store = Store.from_url(f"sqlite+aiosqlite:///{tmp_path / 'data' / 'cage.db'}")
    await store.migrate()
    rig = Rig.build(
        root,
        store,
        DockerBackend.from_settings(settings),
        tasks=turn_tasks,
        data_dir=settings.data_dir,
        images=DockerImageBuilder(settings),
        labels=test_run_labels,
        environ={"FAKE_KEY": KEY},
    )
    rig.manager.settings = settings
    yield rig
    await rig.service.aclose()
    await store.aclose()
