"""`cage run` of a hook assistant in LLM mode (a real process, the fake model server, no Docker):
its Next hook's `data` and `metadata` are written into `summary.json`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.assistants import write_assistant, write_connector
from tests.fakes.model_server import FakeModelServer
from tests.subprocess_env import subprocess_env

ROOT = Path(__file__).resolve().parents[3]
KEY = "sk-fake-run-summary-key-0073"
NEXT_HOOK = (
    "async def next(ctx, payload, options):\n"
    "    return {'data': {'answer': payload['completion']['content']},\n"
    "            'metadata': {'ticket': 'T-9', 'score': 4}}\n"
)


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer("text", host="127.0.0.1") as running:
        running.add_scenario("answer", [{"text": "forty-two"}])
        yield running


def test_a_next_hooks_data_and_metadata_are_in_summary_json(server: FakeModelServer, tmp_path: Path) -> None:
    app = tmp_path / "app"
    (app / "assistants").mkdir(parents=True)
    (app / "agent.yml").write_text("uses:\n  default: fake\n")
    url = server.url + "/v1"
    write_connector(app, "fake", kind="openai", model="fake-model@answer", host=url, key_env="RUN_KEY")
    package = {"name": "summary hooks", "connector": "fake"}
    write_assistant(
        app, "ci.hooked", package=package, prompts="- role: system\n  content: Be terse.\n", hooks=NEXT_HOOK
    )
    workspace, out = tmp_path / "ws", tmp_path / "out"
    workspace.mkdir()
    if os.geteuid() == 0:  # `cage run` never works in a root-owned checkout: give it to a CI user's uid
        os.chown(workspace, 1000, 1000)
    env = {
        **subprocess_env(strip=("CAGE_", "_CAGE")),
        "CAGE_APP_DIR": str(app),
        "CAGE_DATA_DIR": str(tmp_path / "data"),
        "RUN_KEY": KEY,
    }
    argv = [
        sys.executable,
        "-m",
        "orchestrator.cli",
        "run",
        "ci.hooked",
        "--workspace",
        str(workspace),
        "--prompt",
        "what is the answer?",
        "--output",
        "jsonl",
        "--output-dir",
        str(out),
    ]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["assistant"] == "ci.hooked"
    assert summary["runner"] is None
    assert summary["data"] == {"answer": "forty-two"}
    assert summary["metadata"] == {"ticket": "T-9", "score": 4}
    assert KEY not in done.stdout + done.stderr + (out / "summary.json").read_text()
