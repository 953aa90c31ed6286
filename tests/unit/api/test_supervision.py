"""H11: background work cannot take the server down, and health says what the runtime is doing.

A real uvicorn serving the app; the engine is a fake whose calls time out or hang the way a
docker-py call to a stuck daemon does.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
import requests.exceptions

from orchestrator.api import ApiConfig, create_app
from orchestrator.dsl import AppLoader
from orchestrator.errors import EngineUnavailable
from orchestrator.sandbox import SandboxRef, SandboxRequest
from orchestrator.sandbox.docker.errors import engine_errors
from tests.unit.api.conftest import Served, echo_script, make_settings
from tests.unit.api.harness import ServerThread, create_keys, fake_services, wait_for
from tests.unit.sandbox.fakes import FakeBackend


class StuckEngine(FakeBackend):
    """`remove` and `stop` raise docker-py's ReadTimeout; `ping` hangs while `hung` is set."""

    def __init__(self) -> None:
        super().__init__(script=echo_script)
        self.removals = 0
        self.hung = False

    async def remove(self, ref: SandboxRef, *, force: bool = False) -> None:
        self.removals += 1
        raise requests.exceptions.ReadTimeout("UnixHTTPConnectionPool: Read timed out. (read timeout=60)")

    async def stop(self, ref: SandboxRef, *, timeout: float = 2.0) -> None:  # noqa: ASYNC109 - protocol
        raise requests.exceptions.ReadTimeout("Read timed out.")

    async def ping(self) -> None:
        if self.hung:
            await anyio.sleep(3600)


@pytest.fixture
def stuck(tmp_path: Path) -> Iterator[Served]:
    settings = make_settings(tmp_path, reaper_interval=0.1)
    keys = create_keys(settings, {"alice": ("user", "alice")})
    backend = StuckEngine()
    config = ApiConfig(readiness_timeout=0.5)
    server = ServerThread(create_app(settings, services=fake_services(backend), config=config)).start()
    try:
        yield Served(server=server, settings=settings, keys=keys, backend=backend)
    finally:
        server.stop()


def test_engine_timeouts_are_translated() -> None:
    with pytest.raises(EngineUnavailable, match="Read timed out"), engine_errors("box"):
        raise requests.exceptions.ReadTimeout("Read timed out.")


def _idle_oneshot_box(served: Served) -> None:
    """A session box released at once and already past its idle timeout: the reaper removes it."""
    manager = served.server.app.state.api.services.manager
    assistant = AppLoader(served.settings.app_dir, environ={}).get("tests.box")
    assert assistant.sandbox is not None
    spec = assistant.sandbox.model_copy(update={"idle_timeout": datetime.timedelta(milliseconds=10)})
    request = SandboxRequest(
        owner="alice", assistant_id="tests.box", assistant_dir=assistant.path, spec=spec, session_id="c1"
    )
    served.server.call(manager.release(served.server.call(manager.acquire(request))))


async def test_a_reaper_whose_engine_times_out_leaves_the_server_serving(stuck: Served) -> None:
    backend = stuck.backend
    assert isinstance(backend, StuckEngine)
    _idle_oneshot_box(stuck)
    wait_for(lambda: backend.removals >= 3, timeout=10)  # pass after pass, the reaper keeps trying
    async with httpx.AsyncClient(base_url=stuck.url, headers=stuck.auth("alice")) as client:
        health = await client.get("/healthz")
        ready = await client.get("/readyz")
        sessions = await client.get("/v1/sessions")
        memory = await client.put("/v1/memory/still-here", json={"value": "yes"})
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert ready.status_code == 200, ready.text
    assert sessions.status_code == 200
    assert memory.status_code == 200, memory.text


async def test_readyz_answers_503_quickly_on_a_hung_engine(stuck: Served) -> None:
    backend = stuck.backend
    assert isinstance(backend, StuckEngine)
    backend.hung = True
    async with httpx.AsyncClient(base_url=stuck.url, timeout=10) as client:
        started = time.monotonic()
        first = await client.get("/readyz")
        first_took = time.monotonic() - started
        started = time.monotonic()
        again = await client.get("/readyz")  # the first check still hangs: answered at once
        again_took = time.monotonic() - started
        health = await client.get("/healthz")
    assert first.status_code == 503 and first_took < 2.0
    assert first.json()["engine"].startswith("error: no answer within 0.5s")
    assert first.json()["database"] == "ok"
    assert again.status_code == 503 and again_took < 1.0
    assert "still waiting" in again.json()["engine"]
    assert health.status_code == 200  # alive, just not ready
    backend.hung = False


def test_healthz_is_503_once_shutdown_begins(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    create_keys(settings, {})
    server = ServerThread(create_app(settings, services=fake_services(FakeBackend()))).start()
    state = server.app.state.api
    assert httpx.get(f"{server.base_url}/healthz").status_code == 200
    state.supervisor.serving = False  # what the lifespan does first on shutdown
    try:
        response = httpx.get(f"{server.base_url}/healthz")
        assert response.status_code == 503 and response.json() == {"status": "unavailable"}
    finally:
        server.stop()
