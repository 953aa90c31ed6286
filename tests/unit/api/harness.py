"""A real uvicorn server on loopback around `create_app`, plus a test application directory.

`ServerThread` runs uvicorn in its own thread and event loop, so tests can use any client (sync
or async) against `base_url`. `fake_services` opens the process's `Services` with the real SQLite
store and sandbox manager over fakes of the engine (`FakeBackend`, `FakeImageBuilder`) and of the
pipeline (`FakeTurnService`); `pipeline_services` keeps the fake engine but runs the real pipeline.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import uvicorn
from fastapi import FastAPI

from orchestrator.assistants import AssistantRegistry
from orchestrator.dsl import AppLoader
from orchestrator.gateway import ModelGateway
from orchestrator.sandbox import SandboxManager
from orchestrator.services import Services, ServicesFactory, open_services
from orchestrator.settings import Settings
from orchestrator.store import KeyRole, Store
from tests.fakes.turns import FakeTurnService
from tests.unit.sandbox.fakes import FakeBackend, FakeImageBuilder

T = TypeVar("T")
BOOTSTRAP_KEY = "cage-bootstrap-0123456789abcdef"

ECHO_PACKAGE = '{"name": "Echo", "description": "Answers with what it got."}'
PROMPTS = "- role: system\n  content: You echo.\n"
BOX_SANDBOX = """{
  "version": "2.0",
  "runner": {"name": "tai"},
  "lifecycle": "session",
  "idle_timeout": "30m",
}"""


def write_app(root: Path) -> Path:
    """An application directory with `tests.echo` (LLM mode) and `tests.box` (session sandbox)."""
    for name, sandbox in (("echo", None), ("box", BOX_SANDBOX)):
        directory = root / "assistants" / "tests" / name
        directory.mkdir(parents=True)
        (directory / "package.yao").write_text(ECHO_PACKAGE.replace("Echo", name.title()))
        (directory / "prompts.yml").write_text(PROMPTS)
        if sandbox is not None:
            (directory / "sandbox.yao").write_text(sandbox)
    return root


def fake_services(backend: FakeBackend | None = None) -> ServicesFactory:
    """Real store and manager; fake engine, image builder and pipeline."""

    @asynccontextmanager
    async def build(settings: Settings) -> AsyncIterator[Services]:
        engine = backend or FakeBackend()
        images = FakeImageBuilder()
        loader = AppLoader(settings.app_dir, environ={})
        async with Store.from_settings(settings) as store:
            assistants = AssistantRegistry(loader, store)
            async with FakeTurnService(store, assistants=assistants) as turns:
                yield Services(
                    settings=settings,
                    loader=loader,
                    backend=engine,
                    images=images,
                    manager=SandboxManager(engine, images, settings),
                    gateway=ModelGateway(),
                    store=store,
                    assistants=assistants,
                    turns=turns,
                )

    return build


def pipeline_services(backend: FakeBackend | None = None) -> ServicesFactory:
    """The production wiring (`open_services`: real store, manager and `PipelineService`, hook and
    LLM turns run for real) over a fake engine."""

    def build(settings: Settings) -> AbstractAsyncContextManager[Services]:
        return open_services(settings, engine=(backend or FakeBackend(), FakeImageBuilder()))

    return build


def create_keys(settings: Settings, keys: dict[str, tuple[KeyRole, str]]) -> dict[str, str]:
    """Make API keys in the settings' database: name -> (role, owner); returns name -> token."""

    async def make() -> dict[str, str]:
        async with Store.from_settings(settings) as store:
            await store.migrate()
            return {
                name: (await store.keys.create_key(name, role, owner))[1]
                for name, (role, owner) in keys.items()
            }

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # callers may be inside an event loop
        return pool.submit(anyio.run, make).result()


class ServerThread:
    """uvicorn serving `app` on 127.0.0.1 (a free port) in a background thread."""

    def __init__(self, app: FastAPI, *, ws_ping_interval: float = 20.0) -> None:
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            access_log=False,
            lifespan="on",
            ws_ping_interval=ws_ping_interval,
            ws_ping_timeout=ws_ping_interval,
            timeout_graceful_shutdown=5,
        )
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._serve()), name="uvicorn-test", daemon=True
        )
        self.port = 0
        self.loop: asyncio.AbstractEventLoop | None = None

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        await self.server.serve()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        """Run `coro` on the server's event loop (to reach app state the way a request would)."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def app(self) -> FastAPI:
        app = self.server.config.app
        assert isinstance(app, FastAPI)
        return app

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self, timeout: float = 20.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError("uvicorn did not stop")


def wait_for(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)
