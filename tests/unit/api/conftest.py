"""Fixtures: a served app on loopback with a real SQLite store and fakes for engine and pipeline."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator.api import ApiConfig, create_app
from orchestrator.sandbox import ExecSpec, SandboxRef
from orchestrator.settings import Settings
from tests.unit.api.harness import BOOTSTRAP_KEY, ServerThread, create_keys, fake_services, write_app
from tests.unit.sandbox.fakes import FakeBackend, FakeResult


@dataclass
class Served:
    server: ServerThread
    settings: Settings
    keys: dict[str, str]
    backend: FakeBackend

    @property
    def url(self) -> str:
        return self.server.base_url

    def auth(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[name]}"}


def echo_script(ref: SandboxRef, spec: ExecSpec) -> FakeResult:
    """Every exec prints its argv; `false` fails with a message on stderr."""
    if spec.argv[0] == "false":
        return FakeResult(exit_code=1, stderr=b"it failed")
    return FakeResult(stdout=[" ".join(spec.argv).encode(), f"user={spec.user or '-'}".encode()])


def make_settings(tmp_path: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "app_dir": write_app(tmp_path / "app"),
        "data_dir": tmp_path / "data",
        "bootstrap_admin_key": BOOTSTRAP_KEY,
        "max_sandboxes_per_owner": 1,
        "reaper_interval": 3600.0,
    }
    values.update(overrides)
    return Settings.model_validate(values)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    settings = make_settings(tmp_path)
    keys = create_keys(
        settings, {"admin": ("admin", "ops"), "alice": ("user", "alice"), "bob": ("user", "bob")}
    )
    backend = FakeBackend(script=echo_script)
    config = ApiConfig(rate_limit_per_minute=6000, rate_limit_burst=1000)
    server = ServerThread(create_app(settings, services=fake_services(backend), config=config)).start()
    try:
        yield Served(server=server, settings=settings, keys=keys, backend=backend)
    finally:
        server.stop()
