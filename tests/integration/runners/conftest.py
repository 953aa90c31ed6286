"""End-to-end fixtures: a fake model server, an app dir per test, and `cage run` as a real process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.fakes.model_server import FakeModelServer
from tests.subprocess_env import ENGINE_VARS, subprocess_env

CAGE = [sys.executable, "-m", "orchestrator.cli"]
REPO = Path(__file__).resolve().parents[3]
SITE_PACKAGES = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
SYSTEM_PYTHON = "/usr/bin/python3"
"""What another user runs `cage` with: the venv's interpreter may sit in a directory only root can enter."""
HOST_CA = "/etc/ssl/certs/ca-certificates.crt"
RUNNER_CONNECTOR = {"claude": "anthropic", "codex": "openai", "opencode": "openai"}
RUNNER_MODEL = {"claude": "claude-sonnet-4-5", "codex": "gpt-5.5", "opencode": "fake-model"}


@pytest.fixture(scope="session")
def model_server(docker_engine: docker.DockerClient) -> Iterator[FakeModelServer]:
    with FakeModelServer("hello", host="0.0.0.0") as server:
        server.add_scenario("cancel-me", [{"shell": "sleep 120"}, {"text": "done"}])
        server.add_scenario(
            "edit", [{"shell": "sed -i s/old/new/ notes.txt && echo added > added.txt"}, {"text": "edited"}]
        )
        # a persistent 500 that asks for immediate retries: opencode's fixed 5-retry backoff honours it
        server.add_scenario("e500", [{"text": "unreachable", "fail_status": 500, "retry_after_ms": 0}])
        yield server


@dataclass
class App:
    root: Path
    server: FakeModelServer
    labels: dict[str, str]
    data_dir: Path
    sandbox_ids: list[str] = field(default_factory=list)

    def assistant(
        self,
        runner: str,
        *,
        scenario: str = "hello",
        lifecycle: str = "oneshot",
        environment: dict[str, str] | None = None,
        options: dict[str, Any] | None = None,
    ) -> str:
        kind = RUNNER_CONNECTOR[runner]
        conn_id = f"fake-{runner}-{scenario}"
        (self.root / "connectors").mkdir(parents=True, exist_ok=True)
        host = self.server.url if kind == "anthropic" else self.server.url + "/v1"
        (self.root / "connectors" / f"{conn_id}.conn.yao").write_text(
            json.dumps(
                {
                    "label": conn_id,
                    "type": kind,
                    "options": {
                        "model": f"{RUNNER_MODEL[runner]}@{scenario}",
                        "key": "$ENV.FAKE_MODEL_KEY",
                        "host": host,
                        "max_retries": 1,
                    },
                }
            )
        )
        adir = self.root / "assistants" / "e2e" / runner
        adir.mkdir(parents=True, exist_ok=True)
        (adir / "package.yao").write_text(json.dumps({"name": f"e2e {runner}", "connector": conn_id}))
        (adir / "prompts.yml").write_text("- role: system\n  content: You are a careful coding agent.\n")
        (adir / "sandbox.yao").write_text(
            json.dumps(
                {
                    "version": "2.0",
                    "runner": {"name": runner, "options": options or {}},
                    "lifecycle": lifecycle,
                    "environment": environment or {},
                    "computer": {"memory": "1GB"},
                }
            )
        )
        return f"e2e.{runner}"

    def env(self) -> dict[str, str]:
        env = subprocess_env(keep=ENGINE_VARS)
        if Path(HOST_CA).is_file():
            env.setdefault("CAGE_EXTRA_CA_CERTS", HOST_CA)
        env.update(
            {
                "CAGE_APP_DIR": str(self.root),
                "CAGE_DATA_DIR": str(self.data_dir),
                "CAGE_SANDBOX_LABELS": json.dumps(self.labels),
                "FAKE_MODEL_KEY": "sk-fake-e2e-key-123456",
            }
        )
        return env


@dataclass
class RunResult:
    code: int
    events: list[dict[str, Any]]
    stderr: str
    stdout: str = ""

    def of(self, type_: str, event: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.events
            if e["type"] == type_ and (event is None or e["props"].get("event") == event)
        ]

    @property
    def end(self) -> dict[str, Any]:
        return self.of("event", "stream_end")[-1]["props"]


def _parse(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


@contextlib.contextmanager
def searchable_by_others(*paths: Path) -> Iterator[None]:
    """Let other users pass through every directory above `paths` (search, not read), as long as
    the block runs: a clone made in `mktemp -d` (mode 0700) hides this checkout's packages from the
    non-root user a test runs `cage run` as. The modes are put back afterwards."""
    changed: dict[Path, int] = {}
    for path in paths:
        for directory in [path, *path.parents]:
            mode = directory.stat().st_mode
            if directory not in changed and not mode & stat.S_IXOTH:
                changed[directory] = stat.S_IMODE(mode)
                directory.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
    try:
        yield
    finally:
        for directory, mode in changed.items():
            directory.chmod(mode)


def cage_run(
    app: App,
    assistant: str,
    workspace: Path,
    prompt: str,
    *,
    session: str | None = None,
    extra: list[str] | None = None,
    interrupt_after: str | None = None,
    timeout: float = 180,
    output: str = "jsonl",
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    user: str | None = None,
) -> RunResult:
    """Run `cage run` as a real process; with `interrupt_after`, SIGINT it once that text appears on stdout."""
    argv = [*CAGE, "run", assistant, "--workspace", str(workspace), "--prompt", prompt, "--output", output]
    with contextlib.ExitStack() as stack:
        if user is not None:  # as another (non-root) user: the system python with this checkout's packages
            stack.enter_context(searchable_by_others(REPO, Path(SITE_PACKAGES)))
            argv = [
                "runuser",
                "-u",
                user,
                "--",
                "env",
                f"PYTHONPATH={REPO}:{SITE_PACKAGES}",
                SYSTEM_PYTHON,
                *argv[1:],
            ]
        if session:
            argv += ["--session", session]
        argv += extra or []
        proc = subprocess.Popen(
            argv,
            env={**app.env(), **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
        )
        if interrupt_after is None:
            out, err = proc.communicate(timeout=timeout)
            return RunResult(proc.returncode, _parse(out) if output == "jsonl" else [], err, out)
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + timeout
        for line in proc.stdout:
            lines.append(line)
            if interrupt_after in line:
                proc.send_signal(signal.SIGINT)
                break
            assert time.monotonic() < deadline, "interrupt marker never appeared"
        # keep reading through the same buffered file: communicate() would skip what it already buffered
        rest = proc.stdout.read()
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.wait(timeout=timeout)
        proc.stdout.close()
        proc.stderr.close()
        return RunResult(proc.returncode, _parse("".join(lines) + rest), err, "".join(lines) + rest)


@pytest.fixture
def app(tmp_path: Path, model_server: FakeModelServer, test_run_labels: dict[str, str]) -> App:
    root = tmp_path / "app"
    root.mkdir()
    # a label of this test's own: an assertion on what is left counts only this test's containers
    labels = {**test_run_labels, "cage.test-case": uuid.uuid4().hex[:12]}
    return App(root, model_server, labels, tmp_path / "data")


CHECKOUT_UID = 1000
"""Owner of the tests' checkouts: `cage run` runs the agent as the checkout's owner, never as root."""


def own(path: Path, uid: int = CHECKOUT_UID) -> Path:
    """Give `path` and everything below it to `uid` (a CI user's checkout), as the test setup."""
    for item in [path, *path.rglob("*")]:
        os.lchown(item, uid, uid)
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return own(ws)
