"""Claude Code, Codex and opencode end to end: `cage run` -> sandbox manager -> real CLI -> fake model."""

from __future__ import annotations

import json
import time
from pathlib import Path

import docker
import pytest

from orchestrator.stream import validate_stream
from tests.integration.runners.conftest import App, RunResult, cage_run

RUNNERS = ["claude", "codex", "opencode"]
pytestmark = pytest.mark.slow


def _boxes(client: docker.DockerClient, app: App, assistant: str) -> list[docker.models.containers.Container]:
    labels = [f"{k}={v}" for k, v in app.labels.items()] + [f"cage.assistant={assistant}", "cage.owner=local"]
    return client.containers.list(all=True, filters={"label": labels})


def _assert_well_formed(result: RunResult) -> None:
    assert validate_stream(result.events) == []
    assert result.events[0]["props"]["event"] == "stream_start"
    assert result.events[-1]["props"]["event"] == "stream_end"


@pytest.mark.parametrize("runner", RUNNERS)
def test_tool_turn_writes_the_file_and_streams_every_phase(
    runner: str, app: App, workspace: Path, docker_engine: docker.DockerClient
) -> None:
    assistant = app.assistant(runner)
    result = cage_run(app, assistant, workspace, "please write hello.txt")
    assert result.code == 0, result.stderr[-2000:]
    _assert_well_formed(result)
    assert result.end["status"] == "completed"
    assert (workspace / "hello.txt").read_text().strip() == "hello"
    running = [e for e in result.of("execute") if e["props"].get("status") == "running"]
    done = [e for e in result.of("execute") if e["props"].get("status") == "completed"]
    assert running and done
    assert running[0]["message_id"] == done[0]["message_id"]
    summaries = " ".join(str(e["props"].get("summary") or "") for e in result.of("execute"))
    assert "hello" in summaries
    assert "done" in "".join(e["props"]["content"] for e in result.of("text"))
    assert result.of("event", "token/usage") and result.of("event", "result/summary")
    assert result.end.get("usage", {}).get("output_tokens", 0) > 0
    assert _boxes(docker_engine, app, assistant) == []  # oneshot: removed after the turn
    assert "sk-fake-e2e-key-123456" not in json.dumps(result.events) + result.stderr


@pytest.mark.parametrize("runner", RUNNERS)
def test_second_turn_resumes_even_after_a_config_change(runner: str, app: App, workspace: Path) -> None:
    assistant = app.assistant(runner, scenario="text", lifecycle="session")
    first = cage_run(app, assistant, workspace, "remember the word PINEAPPLE-42", session="c1")
    assert first.code == 0, first.stderr[-2000:]
    app.assistant(runner, scenario="text", lifecycle="session", environment={"CHANGED": "1"})
    before = len(app.server.requests.all())
    second = cage_run(app, assistant, workspace, "what was the word?", session="c1")
    assert second.code == 0, second.stderr[-2000:]
    _assert_well_formed(second)
    later = [json.dumps(r.body) for r in app.server.requests.all()[before:]]
    assert any("PINEAPPLE-42" in body and "what was the word?" in body for body in later)


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("scenario", ["e500", "error401"])
def test_model_errors_end_the_turn_in_error(runner: str, scenario: str, app: App, workspace: Path) -> None:
    assistant = app.assistant(runner, scenario=scenario)
    started = time.monotonic()
    result = cage_run(app, assistant, workspace, "hi", timeout=120)
    assert result.code == 1, result.stderr[-2000:]
    _assert_well_formed(result)
    assert result.end["status"] == "error"
    errors = result.of("error")
    assert errors and errors[-1]["props"]["message"]
    text = json.dumps(errors).lower()
    if scenario == "error401":
        assert "401" in text or "unauthorized" in text or "authenticat" in text, text
    assert time.monotonic() - started < 120


@pytest.mark.parametrize("runner", RUNNERS)
def test_cancel_mid_tool_kills_the_cli_and_the_session_goes_on(
    runner: str, app: App, workspace: Path, docker_engine: docker.DockerClient
) -> None:
    # `opencode run` prints a tool only once it has finished (reference/clis.md): its serve drive is
    # the one that shows the tool running, so that the interrupt lands while `sleep 120` runs
    options = {"drive": "serve"} if runner == "opencode" else None
    assistant = app.assistant(runner, scenario="cancel-me", lifecycle="session", options=options)
    result = cage_run(
        app, assistant, workspace, "sleep a while", session="c2", interrupt_after='"status":"running"'
    )
    assert result.code == 130, result.stderr[-2000:]
    _assert_well_formed(result)
    assert result.end["status"] == "cancelled"
    assert _boxes(docker_engine, app, assistant) == []  # CI mode: the box and the CLI go with the run
    app.assistant(runner, scenario="text", lifecycle="session")
    again = cage_run(app, assistant, workspace, "still there?", session="c2")
    assert again.code == 0, again.stderr[-2000:]
    assert again.end["status"] == "completed"
