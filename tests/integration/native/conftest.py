"""End-to-end fixtures for the native runners (`yaocode`, `tai`): the `cage run` harness of
`tests/integration/runners` with assistants whose connector plays a named fake-model scenario."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.manager import SandboxLease, SandboxManager, SandboxRequest
from orchestrator.settings import Settings
from tests.fakes.model_server import FakeModelServer
from tests.integration.runners.conftest import App, own
from tests.unit.sandbox.fakes import FakeImageBuilder

PROMPTS = [f"survey area {i}" for i in range(10)]
TIMES = "times.log"


def _timed(i: int) -> str:
    """A bash call that records its start and end, as seen inside the container."""
    return f'echo "start {i} $(date +%s.%N)" >> {TIMES}; sleep 1.5; echo "end {i} $(date +%s.%N)" >> {TIMES}'


SCENARIOS: dict[str, list[dict[str, Any]]] = {
    "fix": [
        {"tool": "read", "args": {"path": "calc.py"}},
        {
            "tool": "edit",
            "args": {"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"},
        },
        {"shell": "python3 -c 'import calc; assert calc.add(2, 3) == 5; print(\"tests passed\")'"},
        {"text": "Fixed add(); the tests pass."},
    ],
    "parallel6": [{"parts": [{"shell": _timed(i)} for i in range(6)]}, {"text": "all six ran"}],
    "loop": [{"shell": "echo again"}, {"shell": "echo again"}, {"text": "unreachable"}],
    "rounds": [
        {"shell": "echo one"},
        {"shell": "echo two"},
        {"shell": "echo three"},
        {"text": "unreachable"},
    ],
    # Sub-agents are not offered `agent`, so their first step drops the call and answers `done`,
    # slowly (delay per SSE event), so that two waves of sub-agents are visible.
    "agents": [{"tool": "agent", "args": {"prompts": PROMPTS}, "delay": 0.15}, {"text": "all reports in"}],
    "cancel-me": [{"shell": "sleep 120"}, {"text": "done"}],
}


@pytest.fixture
async def leased_box(
    docker_engine: docker.DockerClient, sandbox_image: str, test_run_labels: dict[str, str], tmp_path: Path
) -> AsyncIterator[tuple[SandboxManager, SandboxLease]]:
    """A real `yaocode` box leased from a manager over the Docker backend, released after the test."""
    settings = Settings(data_dir=tmp_path / "cage")
    manager = SandboxManager(
        DockerBackend(settings), FakeImageBuilder(tag=sandbox_image), settings, extra_labels=test_run_labels
    )
    spec = SandboxSpec.model_validate({"version": "2.0", "runner": {"name": "yaocode"}})
    # an owner of its own: a fixed one names one workspace volume for every test (and every session
    # on the engine), and a file a test made there is in the next one's box
    owner = f"native-it-{uuid.uuid4().hex[:8]}"
    request = SandboxRequest(owner=owner, assistant_id="tests.tools", assistant_dir=tmp_path, spec=spec)
    lease = await manager.acquire(request)
    try:
        yield manager, lease
    finally:
        await manager.release(lease)


@pytest.fixture(scope="session")
def native_server(docker_engine: docker.DockerClient) -> Iterator[FakeModelServer]:
    with FakeModelServer("text", host="0.0.0.0") as server:
        for name, steps in SCENARIOS.items():
            server.add_scenario(name, steps)
        yield server


class NativeApp(App):
    """An app dir whose assistants run `yaocode` or `tai` against one fake-model scenario."""

    def assistant(
        self,
        runner: str,
        *,
        scenario: str = "fix",
        lifecycle: str = "oneshot",
        environment: dict[str, str] | None = None,
        options: dict[str, Any] | None = None,
    ) -> str:
        conn_id = f"fake-{runner}-{scenario}"
        (self.root / "connectors").mkdir(parents=True, exist_ok=True)
        (self.root / "connectors" / f"{conn_id}.conn.yao").write_text(
            json.dumps(
                {
                    "label": conn_id,
                    "type": "anthropic",
                    "options": {
                        "model": f"claude-sonnet-4-5@{scenario}",
                        "key": "$ENV.FAKE_MODEL_KEY",
                        "host": self.server.url,
                        "max_retries": 1,
                    },
                }
            )
        )
        adir = self.root / "assistants" / "native" / runner
        adir.mkdir(parents=True, exist_ok=True)
        (adir / "package.yao").write_text(json.dumps({"name": f"native {runner}", "connector": conn_id}))
        (adir / "prompts.yml").write_text("- role: system\n  content: You are a careful coding agent.\n")
        sandbox = {
            "version": "2.0",
            "runner": {"name": runner, "options": options or {}},
            "lifecycle": lifecycle,
            "environment": environment or {},
            "computer": {"memory": "1GB"},
        }
        (adir / "sandbox.yao").write_text(json.dumps(sandbox))
        return f"native.{runner}"


@pytest.fixture
def app(tmp_path: Path, native_server: FakeModelServer, test_run_labels: dict[str, str]) -> NativeApp:
    root = tmp_path / "app"
    root.mkdir()
    # a label of this test's own: an assertion on what is left counts only this test's containers
    labels = {**test_run_labels, "cage.test-case": uuid.uuid4().hex[:12]}
    return NativeApp(root, native_server, labels, tmp_path / "data")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A checkout owned by a non-root user (the agent runs as its owner), with a failing `calc.py`."""
    ws = tmp_path / "ws"
    ws.mkdir()
    calc = ws / "calc.py"
    calc.write_text("def add(a, b):\n    return a - b\n")
    return own(ws)
