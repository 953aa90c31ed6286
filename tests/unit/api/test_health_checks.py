"""The orchestrator image's HEALTHCHECK and compose.yaml's healthcheck ask `/readyz`, not `/healthz`:
each command, run as written (only the port moved to a real test server's), passes while the
server is ready and fails while its engine hangs, when `/healthz` would still say ok."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from orchestrator.api import ApiConfig, create_app
from tests.unit.api.conftest import Served, make_settings
from tests.unit.api.harness import ServerThread, create_keys, fake_services
from tests.unit.api.test_supervision import StuckEngine

ROOT = Path(__file__).resolve().parents[3]
SERVED_AT = "http://127.0.0.1:8080"
"""Where both commands expect the server: `cage serve`'s port inside the container."""


def image_health_check() -> list[str]:
    """The exec form of the Dockerfile's `HEALTHCHECK ... CMD [...]` (continuation lines joined)."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    [line] = [line for line in text.splitlines() if line.startswith("HEALTHCHECK ")]
    found = re.search(r"\sCMD\s+(\[.*\])\s*$", line)
    assert found is not None, line  # the exec form: no shell between Docker and the probe
    command: list[str] = json.loads(found.group(1))
    return command


def compose_health_check() -> list[str]:
    service = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]["cage"]
    test: list[str] = service["healthcheck"]["test"]
    assert test[0] == "CMD", test  # the exec form, as in the image
    return test[1:]


COMMANDS = {
    "Dockerfile HEALTHCHECK": image_health_check(),
    "compose.yaml healthcheck": compose_health_check(),
}


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_the_health_checks_ask_readyz(command: list[str]) -> None:
    assert command[:2] == ["python3", "-c"], command
    assert f"urlopen('{SERVED_AT}/readyz'" in command[2] and "/healthz" not in command[2]


@pytest.fixture
def stuck(tmp_path: Path) -> Iterator[Served]:
    settings = make_settings(tmp_path)
    keys = create_keys(settings, {})
    backend = StuckEngine()
    config = ApiConfig(readiness_timeout=0.5)
    server = ServerThread(create_app(settings, services=fake_services(backend), config=config)).start()
    try:
        yield Served(server=server, settings=settings, keys=keys, backend=backend)
    finally:
        server.stop()


def run_against(command: list[str], served: Served) -> int:
    """The command's exit code, run by this interpreter against the test server."""
    code = command[2].replace(SERVED_AT, served.url)
    assert code != command[2]
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=30, check=False
    ).returncode


def test_the_health_checks_fail_while_the_server_is_alive_but_not_ready(stuck: Served) -> None:
    backend = stuck.backend
    assert isinstance(backend, StuckEngine)
    assert {name: run_against(c, stuck) for name, c in COMMANDS.items()} == dict.fromkeys(COMMANDS, 0)
    backend.hung = True
    assert httpx.get(f"{stuck.url}/healthz", timeout=10).status_code == 200  # alive all the same
    exits = {name: run_against(c, stuck) for name, c in COMMANDS.items()}
    backend.hung = False
    assert all(code != 0 for code in exits.values()), exits
