"""Yao's development application (tests/fixtures/yao-dev-app), copied per test, run through the
real pipeline. Only deployment config changes: the connectors its test assistants use point at the
fake model server (as a Yao user points them at their provider); assistants stay as Yao ships them.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from anyio.abc import TaskGroup

from orchestrator.store import Store
from tests.fakes.model_server import FakeModelServer
from tests.pipeline_rig import Rig
from tests.ts_runtime import ensure_ts_runtime
from tests.unit.dsl.test_yao_layout import DEV_APP, app_environ
from tests.unit.sandbox.fakes import FakeBackend

KEY = "sk-fake-yao-dev-app-0042"
ANSWER = "Hello from the fake model."
OPENAI_CONNECTORS = ("gpt-4o", "gpt-4o-mini", "deepseek/r1", "openai/gpt-4o-mini")
ANTHROPIC_CONNECTORS = ("moonshot/kimi-k2_5-code",)
"""Yao reaches Claude Code through its a2o proxy; Cage's claude runner needs an anthropic connector."""


@pytest.fixture(scope="session")
def ts_runtime() -> None:
    ensure_ts_runtime()


needs_node = pytest.mark.usefixtures("ts_runtime")


@pytest.fixture(scope="session")
def yao_model_server() -> Iterator[FakeModelServer]:
    with FakeModelServer([{"text": ANSWER}], host="0.0.0.0") as server:
        yield server


def point_connectors(root: Path, host: str) -> None:
    for rel, kind in [
        *((c, "openai") for c in OPENAI_CONNECTORS),
        *((c, "anthropic") for c in ANTHROPIC_CONNECTORS),
    ]:
        path = root / "connectors" / f"{rel}.conn.yao"
        model = "claude-sonnet-4-5@hello" if kind == "anthropic" else "gpt-4o"
        path.write_text(
            json.dumps(
                {
                    "label": rel,
                    "type": kind,
                    "options": {"model": model, "key": "$ENV.YAO_TEST_KEY", "host": host, "max_retries": 1},
                }
            )
        )


def copy_dev_app(dest: Path, host: str) -> Path:
    shutil.copytree(DEV_APP, dest)
    point_connectors(dest, host)
    return dest


def environ(root: Path) -> dict[str, str]:
    return {**app_environ(root), "YAO_TEST_KEY": KEY}


@pytest.fixture
async def yao_rig(
    tmp_path: Path, yao_model_server: FakeModelServer, turn_tasks: TaskGroup
) -> AsyncIterator[Rig]:
    """The dev app on the real pipeline (SQLite store); hook assistants need no container."""
    root = copy_dev_app(tmp_path / "app", yao_model_server.url)
    store = Store.from_url(f"sqlite+aiosqlite:///{tmp_path / 'cage.db'}")
    await store.migrate()
    rig = Rig.build(
        root, store, FakeBackend(), tasks=turn_tasks, data_dir=tmp_path / "data", environ=environ(root)
    )
    yield rig
    await rig.service.aclose()
    await store.aclose()


@pytest.fixture
async def yao_docker_rig(
    tmp_path: Path,
    yao_model_server: FakeModelServer,
    test_run_labels: dict[str, str],
    docker_engine: object,
    turn_tasks: TaskGroup,
) -> AsyncIterator[Rig]:
    """The dev app on the real pipeline with real containers (runner images as `cage images build`)."""
    from orchestrator.sandbox.docker import DockerBackend
    from orchestrator.sandbox.docker.builder import DockerImageBuilder
    from orchestrator.settings import Settings
    from tests.integration.pipeline.conftest import HOST_CA

    root = copy_dev_app(tmp_path / "app", yao_model_server.url)
    settings = Settings(
        app_dir=root, data_dir=tmp_path / "data", sandbox_labels=test_run_labels, extra_ca_certs=HOST_CA
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
        environ=environ(root),
    )
    rig.manager.settings = settings
    yield rig
    await rig.service.aclose()
    await store.aclose()
