"""Pipeline fixtures: a real store (every test twice: a SQLite file and Postgres), the fake hook
assistants, and a sandbox manager over the in-memory fake backend (runner mode replays CLI output).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from anyio.abc import TaskGroup

from orchestrator.store import Store
from tests.fakes.assistants import make_app
from tests.pipeline_rig import Rig
from tests.unit.sandbox.fakes import FakeBackend
from tests.unit.store.conftest import FakeClock, database_url, postgres_url

__all__ = ["database_url", "postgres_url"]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(database_url: str, clock: FakeClock) -> AsyncIterator[Store]:
    st = Store.from_url(database_url, clock=clock)
    await st.migrate()
    yield st
    await st.aclose()


@pytest.fixture
def app_root(tmp_path: Path) -> Path:
    return make_app(tmp_path / "app")


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
async def rig(
    app_root: Path, store: Store, backend: FakeBackend, tmp_path: Path, turn_tasks: TaskGroup
) -> AsyncIterator[Rig]:
    running = Rig.build(app_root, store, backend, tasks=turn_tasks, data_dir=tmp_path / "data")
    yield running
    await running.service.aclose()
