"""Fixtures for the key attacks: a fake model server, an app with one assistant per runner, and
`cage run` as a real process (the CI job mode, where the key is the organisation's).

Imported by `tests/security/test_keys_*.py`; the integration fixtures `docker_engine` and
`test_run_labels` come from `tests/integration/conftest.py`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.fakes.model_server import FakeModelServer
from tests.integration.conftest import docker_engine, test_run_labels
from tests.subprocess_env import ENGINE_VARS, subprocess_env

__all__ = ["KeysApp", "docker_engine", "keys_app", "keys_model", "test_run_labels"]

HOST_CA = "/etc/ssl/certs/ca-certificates.crt"
KINDS = {
    "claude": "anthropic",
    "codex": "openai",
    "opencode": "openai",
    "tai": "anthropic",
    "yaocode": "anthropic",
}
MODELS = {
    "claude": "claude-sonnet-4-5",
    "codex": "gpt-5.5",
    "opencode": "fake-model",
    "tai": "claude-sonnet-4-5",
    "yaocode": "claude-sonnet-4-5",
}


@pytest.fixture(scope="module")
def keys_model(docker_engine: docker.DockerClient) -> Iterator[FakeModelServer]:
    with FakeModelServer("text", host="0.0.0.0") as server:
        yield server


@dataclass
class KeysApp:
    """An application directory whose connectors hold `key` (from `$ENV.CANARY_MODEL_KEY`)."""

    root: Path
    data_dir: Path
    server: FakeModelServer
    labels: dict[str, str]
    key: str

    def assistant(
        self,
        runner: str,
        scenario: str,
        *,
        name: str | None = None,
        lifecycle: str = "session",
        options: dict[str, Any] | None = None,
        key_env: str = "CANARY_MODEL_KEY",
    ) -> str:
        name = name or runner
        kind = KINDS[runner]
        conn_id = f"conn-{name}"
        (self.root / "connectors").mkdir(parents=True, exist_ok=True)
        host = self.server.url if kind == "anthropic" else self.server.url + "/v1"
        (self.root / "connectors" / f"{conn_id}.conn.yao").write_text(
            json.dumps(
                {
                    "label": conn_id,
                    "type": kind,
                    "options": {
                        "model": f"{MODELS[runner]}@{scenario}",
                        "key": f"$ENV.{key_env}",
                        "host": host,
                        "max_retries": 1,
                    },
                }
            )
        )
        adir = self.root / "assistants" / "keys" / name
        adir.mkdir(parents=True, exist_ok=True)
        (adir / "package.yao").write_text(json.dumps({"name": f"keys {name}", "connector": conn_id}))
        (adir / "prompts.yml").write_text("- role: system\n  content: You are a careful coding agent.\n")
        (adir / "sandbox.yao").write_text(
            json.dumps(
                {
                    "version": "2.0",
                    "runner": {"name": runner, "options": options or {}},
                    "lifecycle": lifecycle,
                    "computer": {"memory": "1GB"},
                }
            )
        )
        return f"keys.{name}"

    def env(self) -> dict[str, str]:
        env = subprocess_env(keep=ENGINE_VARS)
        if Path(HOST_CA).is_file():
            env.setdefault("CAGE_EXTRA_CA_CERTS", HOST_CA)
        env.update(
            {
                "CAGE_APP_DIR": str(self.root),
                "CAGE_DATA_DIR": str(self.data_dir),
                "CAGE_SANDBOX_LABELS": json.dumps(self.labels),
                "CANARY_MODEL_KEY": self.key,
                "CAGE_LOG_LEVEL": "DEBUG",
            }
        )
        return env


@pytest.fixture
def keys_app(tmp_path: Path, keys_model: FakeModelServer, test_run_labels: dict[str, str]) -> KeysApp:
    root = tmp_path / "app"
    root.mkdir()
    key = "cnry" + os.urandom(12).hex()  # no key shape: the redactor must not be what hides it
    return KeysApp(root, tmp_path / "data", keys_model, test_run_labels, key)
