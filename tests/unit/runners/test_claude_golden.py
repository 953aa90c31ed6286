"""Every recorded Claude Code transcript replays into exactly its reviewed events (R18)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.stream import validate_stream
from runners.claude import CLI_VERSION, claude_session_id_for
from tests.golden.claude.replay import ASSISTANT_ID, cases, out_path, replay, scenario_name

CASES = cases()


def _expected(case: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out_path(case).read_text(encoding="utf-8").splitlines()]


def _by_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def _lifecycle(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e["props"] for e in events if e["type"] == "event" and e["props"]["event"] == name]


def test_the_goldens_cover_every_required_scenario() -> None:
    names = {scenario_name(c) for c in CASES}
    assert {"hello", "thinking", "error500", "error401", "resume", "cancel", "mcp"} <= names
    assert all(c.parent.name == CLI_VERSION for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=scenario_name)
def test_translation_matches_golden(case: Path) -> None:
    events, _ = replay(case)
    assert events == _expected(case)


@pytest.mark.parametrize("case", CASES, ids=scenario_name)
def test_golden_stream_is_valid_and_has_one_usage_and_summary(case: Path) -> None:
    events, outcome = replay(case)
    assert validate_stream(events, stamped=False) == []
    assert len(_lifecycle(events, "token/usage")) == 1
    assert len(_lifecycle(events, "result/summary")) == 1
    assert _lifecycle(events, "stream_end")[0]["status"] == outcome.status


@pytest.mark.parametrize(
    ("scenario", "status"),
    [
        ("hello", "completed"),
        ("thinking", "completed"),
        ("text", "completed"),
        ("resume", "completed"),
        ("error500", "error"),
        ("error401", "error"),
        ("cancel", "cancelled"),
        ("mcp", "completed"),
    ],
)
def test_outcome_status(scenario: str, status: str) -> None:
    case = next(c for c in CASES if scenario_name(c) == scenario)
    _, outcome = replay(case)
    assert outcome.status == status


@pytest.mark.parametrize("scenario", ["hello", "thinking", "text", "resume"])
def test_streamed_text_is_not_repeated_by_the_whole_message(scenario: str) -> None:
    case = next(c for c in CASES if scenario_name(c) == scenario)
    events, _ = replay(case)
    text = "".join(e["props"]["content"] for e in _by_type(events, "text"))
    assert text == _lifecycle(events, "result/summary")[0]["result"]


def test_hello_runs_the_shell_tool_as_one_execute_message() -> None:
    case = next(c for c in CASES if scenario_name(c) == "hello")
    events, outcome = replay(case)
    runs = _by_type(events, "execute")
    assert len({e["message_id"] for e in runs}) == 1
    assert runs[0]["props"]["status"] == "running"
    assert runs[-1]["props"]["status"] == "completed"
    assert any(e["props"].get("summary") == "echo hello > hello.txt" for e in runs)
    usage = _lifecycle(events, "token/usage")[0]["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0 and usage["cost_usd"] > 0
    assert outcome.usage is not None and outcome.usage.cost_usd == usage["cost_usd"]


def test_thinking_is_forwarded_before_the_answer() -> None:
    case = next(c for c in CASES if scenario_name(c) == "thinking")
    events, _ = replay(case)
    thinking = "".join(e["props"]["content"] for e in _by_type(events, "thinking"))
    assert thinking == "Let me think about this."
    first_text = next(i for i, e in enumerate(events) if e["type"] == "text")
    assert max(i for i, e in enumerate(events) if e["type"] == "thinking") < first_text


@pytest.mark.parametrize(("scenario", "status"), [("error500", 500), ("error401", 401)])
def test_api_errors_become_one_error_event(scenario: str, status: int) -> None:
    case = next(c for c in CASES if scenario_name(c) == scenario)
    events, outcome = replay(case)
    errors = _by_type(events, "error")
    assert len(errors) == 1
    assert errors[0]["props"]["code"] == "model_api_error"
    assert errors[0]["props"]["details"] == {"status": status}
    assert f"API Error: {status}" in errors[0]["props"]["message"]
    assert outcome.error is not None and f"API Error: {status}" in outcome.error
    # the synthetic assistant message carrying the error is not shown as answer text
    assert _by_type(events, "text") == []


def test_error500_retries_show_as_a_loading_notice() -> None:
    case = next(c for c in CASES if scenario_name(c) == "error500")
    events, _ = replay(case)
    notices = [e["props"]["message"] for e in _by_type(events, "loading") if not e["props"].get("done")]
    assert notices == [
        "Model API error (500 server_error); retrying 1/2…",
        "Model API error (500 server_error); retrying 2/2…",
    ]


def test_cancel_fails_the_running_tool_and_reports_the_abort() -> None:
    case = next(c for c in CASES if scenario_name(c) == "cancel")
    events, outcome = replay(case)
    last_run = _by_type(events, "execute")[-1]["props"]
    assert last_run["status"] == "error" and last_run["is_error"] is True
    assert outcome.stop_reason == "aborted_tools"
    assert _by_type(events, "error") == []


def test_resume_continues_the_deterministic_session() -> None:
    case = next(c for c in CASES if scenario_name(c) == "resume")
    events, _ = replay(case)
    expected = claude_session_id_for(ASSISTANT_ID, "golden-resume")
    assert _lifecycle(events, "result/summary")[0]["runner_session_id"] == expected
    init = json.loads(case.read_text(encoding="utf-8").splitlines()[0])
    assert init["session_id"] == expected  # `--session-id` on an existing id would have failed


def test_mcp_tool_runs_with_its_secret_expanded_from_the_env() -> None:
    case = next(c for c in CASES if scenario_name(c) == "mcp")
    events, outcome = replay(case)
    runs = _by_type(events, "execute")
    assert runs[0]["props"]["tool"] == "mcp__orch__report"
    assert runs[-1]["props"]["output"] == "reported: hello (token set)"
    assert "mcp-golden-secret-42" not in case.read_text(encoding="utf-8")
    assert outcome.status == "completed"
