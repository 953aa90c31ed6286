"""yaocode and tai end to end through `cage run`: the same turn, equivalent streams, and cancel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docker
import pytest

from orchestrator.stream import validate_stream
from tests.integration.native.conftest import NativeApp
from tests.integration.runners.conftest import RunResult, cage_run, own

pytestmark = pytest.mark.slow
RUNNERS = ["yaocode", "tai"]
KEY = "sk-fake-e2e-key-123456"
TOOL_TYPES = {"execute", "agent", "todo", "plan", "job", "question"}
FIRST_RUN_TIMEOUT = 900  # the tai image is built from the working tree: the first run may build it


def assert_well_formed(result: RunResult) -> None:
    assert validate_stream(result.events) == []
    assert result.events[0]["props"]["event"] == "stream_start"
    assert result.events[-1]["props"]["event"] == "stream_end"
    assert KEY not in json.dumps(result.events) + result.stderr


def shape(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The stream modulo ids, timing, runner names and the sandbox's own status reports."""
    out: list[tuple[Any, ...]] = []
    for event in events:
        props = event["props"]
        if event["type"] == "event":
            if props["event"] == "sandbox/status":
                continue
            out.append(("event", props["event"], props.get("type"), props.get("status")))
        elif event["type"] in TOOL_TYPES:
            out.append((event["type"], props.get("tool"), props.get("status"), props.get("is_error")))
        else:
            out.append((event["type"], props.get("content"), props.get("code")))
    return out


def test_yaocode_and_tai_fix_a_file_with_equivalent_streams(app: NativeApp, tmp_path: Path) -> None:
    results: dict[str, RunResult] = {}
    for runner in RUNNERS:
        ws = tmp_path / f"ws-{runner}"
        ws.mkdir()
        (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
        own(ws)  # the agent runs as the checkout's owner, never as root
        result = cage_run(app, app.assistant(runner), ws, "fix add()", timeout=FIRST_RUN_TIMEOUT)
        assert result.code == 0, result.stderr[-3000:]
        assert_well_formed(result)
        assert result.end["status"] == "completed"
        assert (ws / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
        done = [e["props"] for e in result.of("execute") if e["props"].get("status") == "completed"]
        assert [p["tool"] for p in done] == ["read", "edit", "bash"]
        assert all(p["runner"] == runner for p in done)
        assert "tests passed" in done[2]["output"]
        assert "".join(e["props"]["content"] for e in result.of("text")) == "Fixed add(); the tests pass."
        (summary,) = result.of("event", "result/summary")
        assert summary["props"]["stop_reason"] == "completed" and summary["props"]["num_turns"] == 4
        assert result.end["usage"]["output_tokens"] > 0
        results[runner] = result
    yaocode, tai = (shape(results[r].events) for r in RUNNERS)
    assert yaocode == tai
    assert len(yaocode) > 20


@pytest.mark.parametrize("runner", RUNNERS)
def test_cancel_mid_tool_stops_the_turn_and_the_command(
    runner: str, app: NativeApp, workspace: Path, docker_engine: docker.DockerClient
) -> None:
    assistant = app.assistant(runner, scenario="cancel-me", lifecycle="session")
    result = cage_run(
        app,
        assistant,
        workspace,
        "sleep a while",
        session=f"cancel-{runner}",
        interrupt_after='"status":"running"',
        timeout=FIRST_RUN_TIMEOUT,
    )
    assert result.code == 130, result.stderr[-3000:]
    assert_well_formed(result)
    assert result.end["status"] == "cancelled"
    labels = [f"{k}={v}" for k, v in app.labels.items()] + [f"cage.assistant={assistant}"]
    # CI mode: the box, its command and the CLI go with the run, whatever the lifecycle
    assert docker_engine.containers.list(all=True, filters={"label": labels}) == []


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_second_turn_continues_the_session(runner: str, app: NativeApp, workspace: Path) -> None:
    assistant = app.assistant(runner, scenario="text")
    session = f"resume-{runner}"
    first = cage_run(
        app, assistant, workspace, "remember PINEAPPLE-42", session=session, timeout=FIRST_RUN_TIMEOUT
    )
    assert first.code == 0, first.stderr[-3000:]
    before = len(app.server.requests.all())
    second = cage_run(app, assistant, workspace, "what was the word?", session=session)
    assert second.code == 0, second.stderr[-3000:]
    assert_well_formed(second)
    later = [json.dumps(r.body) for r in app.server.requests.all()[before:]]
    assert later and all("PINEAPPLE-42" in body and "what was the word?" in body for body in later)
