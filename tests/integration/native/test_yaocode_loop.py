"""The native loop's limits through yaocode, with every tool call in the container."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.stream import validate_stream
from tests.integration.native.conftest import PROMPTS, TIMES, NativeApp
from tests.integration.runners.conftest import RunResult, cage_run

pytestmark = pytest.mark.slow


def max_overlap(spans: list[tuple[float, float]]) -> int:
    """Most spans open at one instant (an end at t closes before a start at t)."""
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    best = current = 0
    for _, step in points:
        current += step
        best = max(best, current)
    return best


def run(app: NativeApp, workspace: Path, scenario: str, **options: object) -> RunResult:
    result = cage_run(app, app.assistant("yaocode", scenario=scenario, options=options), workspace, "go")
    assert validate_stream(result.events) == []
    return result


def test_six_parallel_calls_run_at_most_four_at_once_in_the_container(
    app: NativeApp, workspace: Path
) -> None:
    result = run(app, workspace, "parallel6")
    assert result.code == 0, result.stderr[-3000:]
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    for line in (workspace / TIMES).read_text().splitlines():
        kind, call, stamp = line.split()
        (starts if kind == "start" else ends)[call] = float(stamp)
    assert sorted(starts) == sorted(ends) == [str(i) for i in range(6)]
    spans = [(starts[c], ends[c]) for c in starts]
    overlap = max_overlap(spans)
    assert 2 <= overlap <= 4, spans
    # six 1.5 s calls four at a time take two waves
    assert max(ends.values()) - min(starts.values()) >= 3.0
    done = [e for e in result.of("execute") if e["props"].get("status") == "completed"]
    assert len(done) == 6


def test_a_repeated_call_ends_the_turn_with_tool_loop_terminated(app: NativeApp, workspace: Path) -> None:
    result = run(app, workspace, "loop")
    assert result.code == 1, result.stderr[-3000:]
    assert result.end["status"] == "error" and "tool_loop_terminated" in result.end["error"]
    assert [e["props"]["code"] for e in result.of("error")] == ["tool_loop_terminated"]
    (summary,) = result.of("event", "result/summary")
    assert summary["props"]["stop_reason"] == "tool_loop_terminated"
    ran = [e for e in result.of("execute") if e["props"].get("status") == "completed"]
    assert len(ran) == 1  # the repeat was refused, not run


def test_max_rounds_stops_the_turn(app: NativeApp, workspace: Path) -> None:
    result = run(app, workspace, "rounds", max_rounds=2)
    assert result.code == 1, result.stderr[-3000:]
    assert result.end["status"] == "error" and "max_rounds" in result.end["error"]
    assert [e["props"]["code"] for e in result.of("error")] == ["max_rounds"]
    (summary,) = result.of("event", "result/summary")
    assert summary["props"]["stop_reason"] == "max_rounds" and summary["props"]["num_turns"] == 2
    outputs = [e["props"]["output"] for e in result.of("execute") if e["props"].get("status") == "completed"]
    assert outputs == ["one", "two"]


def test_agent_tool_runs_ten_sub_agents_eight_at_a_time_as_child_sessions(
    app: NativeApp, workspace: Path
) -> None:
    result = run(app, workspace, "agents")
    assert result.code == 0, result.stderr[-3000:]
    opened: dict[str, int] = {}
    spans: list[tuple[float, float]] = []
    for event in result.events:  # the parent's timeline: a started/ended pair per child session
        props = event["props"]
        assert event.get("thread_id") is None  # the children's own events are in their sessions
        if props.get("event") == "subagent/started":
            opened[props["session_id"]] = event["ts"]
        elif props.get("event") == "subagent/ended":
            assert props["status"] == "completed"
            spans.append((opened[props["session_id"]], event["ts"]))
    assert len(opened) == 10 and len(spans) == 10
    assert 2 <= max_overlap(spans) <= 8
    turn_id = result.events[0]["turn_id"]
    trace = json.loads((app.data_dir / "yaocode" / "traces" / f"{turn_id}.json").read_text())
    (call,) = trace["steps"][0]["tools"]
    assert call["name"] == "agent"
    children = call["metadata"]["children"]
    ids = [c["session_id"] for c in children]
    assert len(set(ids)) == 10 and set(ids) == set(opened)
    assert all(c["stop_reason"] == "completed" for c in children)
    checkpoint = json.loads((app.data_dir / "yaocode" / "checkpoints" / f"{turn_id}.json").read_text())
    assert checkpoint["phase"] == "done" and checkpoint["stop_reason"] == "completed"
    report = checkpoint["messages"][2]["content"][0]["output"]
    assert report.count("## task-") == 10 and f"## task-10: {PROMPTS[9]}" in report


def test_turn_timeout_stops_a_long_tool_with_exit_124(app: NativeApp, workspace: Path) -> None:
    assistant = app.assistant("yaocode", scenario="cancel-me")
    result = cage_run(app, assistant, workspace, "sleep a while", extra=["--timeout", "4s"])
    assert result.code == 124, result.stderr[-3000:]
    assert validate_stream(result.events) == []
    assert result.end["status"] == "error" and "timed out" in result.end["error"]
    assert [e["props"]["code"] for e in result.of("error")] == ["turn_timeout"]
    killed = [e["props"] for e in result.of("execute") if e["props"].get("status") == "error"]
    assert killed and killed[0]["tool"] == "bash"
