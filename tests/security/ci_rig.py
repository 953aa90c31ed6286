"""Fixtures for the CI-mode attacks: `cage run` as a real process, the real claude CLI in its box,
tool calls scripted through the fake model server, and a checkout owned by a non-root user.

Imported by `tests/security/test_ci_*.py`; the fixtures come from `tests/integration/conftest.py`
(engine, test-run labels) and `tests/integration/runners/conftest.py` (fake model, app, `cage_run`).
Every attack asserts on the host after the run: files, processes, containers.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import docker

from tests.integration.conftest import docker_engine, test_run_labels
from tests.integration.runners.conftest import App, RunResult, app, cage_run, model_server, own

__all__ = [
    "App",
    "RunResult",
    "app",
    "attack",
    "boxes",
    "cage_run",
    "docker_engine",
    "git",
    "model_server",
    "own",
    "repo",
    "test_run_labels",
    "tool_outputs",
]


def attack(app: App, *shells: str, lifecycle: str = "oneshot") -> str:
    """An assistant whose model runs each of `shells` as a tool call, then answers "done"."""
    name = f"ci-{uuid.uuid4().hex[:10]}"
    app.server.add_scenario(name, [*({"shell": s} for s in shells), {"text": "done"}])
    return app.assistant("claude", scenario=name, lifecycle=lifecycle)


def git(cwd: Path, *args: str) -> str:
    """The test's own git (trusted setup), never pointed at a checkout after an agent had it."""
    argv = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c", "safe.directory=*", *args]
    return subprocess.run(argv, cwd=cwd, check=True, capture_output=True, text=True).stdout


def repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A committed git checkout at `path` (not yet owned by the CI user: call `own` last)."""
    path.mkdir(parents=True)
    for name, text in (files or {"notes.txt": "an old line\n"}).items():
        (path / name).write_text(text)
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "init")
    return path


def boxes(client: docker.DockerClient, app: App) -> list[str]:
    """This test's `cage run` containers, in any state."""
    labels = [f"{k}={v}" for k, v in app.labels.items()] + ["cage.owner=local", "cage.managed=true"]
    return [c.name for c in client.containers.list(all=True, filters={"label": labels})]


def tool_outputs(result: RunResult) -> str:
    """Everything the tools printed, as the agent saw it."""
    return "\n".join(json.dumps(e["props"].get("output", "")) for e in result.of("execute"))
