"""`FakeModelServer`: the app under uvicorn in a background thread, as a context manager."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import uvicorn

from tests.fakes.model_server.app import CutConnectionError, ServerState, create_app
from tests.fakes.model_server.registry import ScenarioRegistry
from tests.fakes.model_server.request_log import RequestLog
from tests.fakes.model_server.scenario import Scenario, Step, scenario

_START_TIMEOUT = 10.0


def _is_cut(exc: BaseException | None) -> bool:
    if isinstance(exc, CutConnectionError):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(_is_cut(e) for e in exc.exceptions)
    return False


class _HideCuts(logging.Filter):
    """Drop uvicorn's traceback for connections we cut on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and _is_cut(record.exc_info[1]))


_HIDE_CUTS = _HideCuts()


class FakeModelServer:
    """A scripted model API on a free port: `with FakeModelServer() as s: ... s.url ...`.

    Listens on all interfaces so that containers reach it through `url_for_containers`
    (start them with `extra_hosts={"host.docker.internal": "host-gateway"}`).
    """

    def __init__(
        self,
        scenario: Scenario | str | Sequence[Step | Mapping[str, Any]] = "hello",
        *,
        host: str = "0.0.0.0",
        port: int = 0,
        log_path: Path | None = None,
    ) -> None:
        self._state = ServerState(registry=ScenarioRegistry(), log=RequestLog(log_path))
        self._state.registry.set_default(scenario)
        self._host, self._wanted_port = host, port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    # -- scenarios -------------------------------------------------------------------------
    def set_scenario(self, value: Scenario | str | Sequence[Step | Mapping[str, Any]]) -> Scenario:
        """Set the default scenario (object, registered name, or list of steps)."""
        return self._state.registry.set_default(value)

    def add_scenario(self, name: str, steps: Scenario | Sequence[Step | Mapping[str, Any]]) -> Scenario:
        """Register a named scenario, chosen by requests with model `scenario:<name>` or `<x>@<name>`."""
        value = (
            steps
            if isinstance(steps, Scenario)
            else scenario(name, [s if isinstance(s, Step) else dict(s) for s in steps])
        )
        value = value.model_copy(update={"name": name})
        self._state.registry.add(value)
        return value

    def reset_failures(self) -> None:
        """Start every `fail_times` count again."""
        self._state.registry.reset_failures()

    # -- addresses -------------------------------------------------------------------------
    @property
    def requests(self) -> RequestLog:
        """Every request so far (auth headers removed), with the scenario and step played."""
        return self._state.log

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeModelServer is not running")
        return self._port

    @property
    def url(self) -> str:
        """Base URL on loopback, without `/v1`."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def url_for_containers(self) -> str:
        """Base URL as seen from a container started with the `host.docker.internal` host-gateway entry."""
        return f"http://host.docker.internal:{self.port}"

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeModelServer:
        """Bind the port and serve in a background thread; returns once it accepts connections."""
        if self._server is not None:
            raise RuntimeError("FakeModelServer already started")
        logging.getLogger("uvicorn.error").addFilter(_HIDE_CUTS)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._wanted_port))
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            create_app(self._state),
            log_level="warning",
            lifespan="off",
            ws="none",
            timeout_graceful_shutdown=2,
            timeout_keep_alive=30,
        )
        self._server = uvicorn.Server(config)
        self._state.closing.clear()
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name=f"fake-model-server:{self._port}",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                sock.close()
                raise RuntimeError("FakeModelServer did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving (hanging streams end too) and wait for the thread; safe to call twice."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._state.closing.set()
        server.should_exit = True
        thread.join(timeout=10)
        self._server, self._thread, self._port = None, None, None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> FakeModelServer:
        return await anyio.to_thread.run_sync(self.start)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await anyio.to_thread.run_sync(self.stop)
