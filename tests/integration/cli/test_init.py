"""`cage init` then `cage validate` then `cage run` of each scaffolded assistant on the fake model,
as a new user would type them (real processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_server import FakeModelServer
from tests.subprocess_env import ENGINE_VARS, subprocess_env

CAGE = [sys.executable, "-m", "orchestrator.cli"]
CHECKOUT_UID = 1000


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer("text", host="0.0.0.0") as server:
        yield server


def _env(tmp_path: Path, labels: dict[str, str]) -> dict[str, str]:
    env = subprocess_env(keep=ENGINE_VARS)
    env.update(
        {
            "ANTHROPIC_API_KEY": "sk-fake-init-key-123456",
            "CAGE_DATA_DIR": str(tmp_path / "data"),
            "CAGE_SANDBOX_LABELS": json.dumps(labels),
        }
    )
    return env


def _cage(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CAGE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _text(events: list[dict[str, Any]]) -> str:
    return "".join(str(e.get("props", {}).get("content", "")) for e in events if e["type"] == "text")


@pytest.fixture
def app(
    tmp_path: Path, model: FakeModelServer, test_run_labels: dict[str, str]
) -> tuple[Path, dict[str, str]]:
    env = _env(tmp_path, test_run_labels)
    created = _cage(
        env,
        "init",
        "demo",
        "--provider",
        "anthropic",
        "--host",
        model.url,
        "--model",
        "claude-sonnet-4-5@text",
        cwd=tmp_path,
    )
    assert created.returncode == 0, created.stderr
    app_dir = tmp_path / "demo"
    validated = _cage(env, "validate", cwd=app_dir)
    assert validated.returncode == 0, validated.stderr
    assert "assistants OK" in validated.stdout
    ws = tmp_path / "ws"
    ws.mkdir()
    os.chown(ws, CHECKOUT_UID, CHECKOUT_UID)  # `cage run` runs the agent as the checkout's owner, never root
    return app_dir, env


def _run(app: tuple[Path, dict[str, str]], assistant: str) -> list[dict[str, Any]]:
    app_dir, env = app
    ws = app_dir.parent / "ws"
    result = _cage(
        env,
        "run",
        assistant,
        "--workspace",
        str(ws),
        "--prompt",
        "hi there",
        "--output",
        "jsonl",
        cwd=app_dir,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    events = _events(result.stdout)
    end = [e for e in events if e["type"] == "event" and e["props"].get("event") == "stream_end"]
    assert end and end[-1]["props"]["status"] == "completed"
    return events


def test_the_hook_assistant_answers_without_a_model(app: tuple[Path, dict[str, str]]) -> None:
    assert _text(_run(app, "app.echo")) == "echo: hi there"


def test_the_llm_assistant_answers_from_the_provider(app: tuple[Path, dict[str, str]]) -> None:
    assert "Hello from the fake model." in _text(_run(app, "app.chat"))


@pytest.mark.slow
def test_the_runner_assistant_runs_its_cli_in_a_sandbox(app: tuple[Path, dict[str, str]]) -> None:
    events = _run(app, "app.coder")
    assert "Hello from the fake model." in _text(events)
    assert any(e["type"] == "event" and e["props"].get("event") == "sandbox/status" for e in events)
