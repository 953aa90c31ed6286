"""Replays every recorded codex transcript and compares it with its reviewed translation (R18)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.stream import validate_stream
from runners.codex import CLI_VERSION
from tests.golden.codex.replay import cases, meta_path, out_path, replay, scenario_name

CASES = cases()
REQUIRED = {"hello", "thinking", "error500", "error401", "resume", "cancelled"}


def _expected(case: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out_path(case).read_text(encoding="utf-8").splitlines()]


def _of(events: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [e["props"] for e in events if e["type"] == "event" and e["props"]["event"] == event]


def test_every_required_scenario_is_recorded() -> None:
    assert {scenario_name(c) for c in CASES} >= REQUIRED
    for case in CASES:
        meta = json.loads(meta_path(case).read_text(encoding="utf-8"))
        assert meta["cli_version"] == CLI_VERSION


@pytest.mark.parametrize("case", CASES, ids=scenario_name)
def test_translation_matches_golden(case: Path) -> None:
    events, _, _ = replay(case)
    assert events == _expected(case)


@pytest.mark.parametrize("case", CASES, ids=scenario_name)
def test_golden_streams_are_valid(case: Path) -> None:
    events, _, _ = replay(case)
    assert validate_stream(events, stamped=False) == []


def _case(name: str) -> Path:
    return next(c for c in CASES if scenario_name(c) == name)


def test_hello_runs_the_command_then_says_done() -> None:
    events, outcome, resume = replay(_case("hello"))
    executes = [e for e in events if e["type"] == "execute"]
    assert [e["props"]["status"] for e in executes] == ["running", "completed"]
    assert {e["message_id"] for e in executes} == {"execute-1"}
    assert executes[0]["props"]["summary"] == "echo hello > hello.txt"  # no /bin/bash -lc wrapper
    texts = [e["props"]["content"] for e in events if e["type"] == "text"]
    assert texts == ["done"]
    assert outcome.status == "completed" and outcome.usage is not None
    assert resume["thread_id"].startswith("01")
    assert int(resume["usage_input_tokens"]) == outcome.usage.input_tokens
    # the unknown-slug "model metadata" error item is a warning, not an error
    assert not [e for e in events if e["type"] == "error"]
    assert [r["raw_type"] for r in _of(events, "runner/raw")] == ["warning"]


def test_resume_reports_this_turns_usage_not_the_threads() -> None:
    case = _case("resume")
    meta = json.loads(meta_path(case).read_text(encoding="utf-8"))
    cumulative = json.loads(case.read_text(encoding="utf-8").splitlines()[-1])["usage"]
    events, outcome, resume = replay(case)
    (usage,) = _of(events, "token/usage")
    before = int(meta["resume"]["usage_input_tokens"])
    assert usage["usage"]["input_tokens"] == cumulative["input_tokens"] - before > 0
    assert usage["usage"]["output_tokens"] == cumulative["output_tokens"] - int(
        meta["resume"]["usage_output_tokens"]
    )
    assert resume["thread_id"] == meta["resume"]["thread_id"]
    assert resume["usage_input_tokens"] == str(cumulative["input_tokens"])
    assert outcome.usage is not None and outcome.usage.input_tokens == usage["usage"]["input_tokens"]


def test_thinking_is_forwarded_before_the_answer() -> None:
    events, _, _ = replay(_case("thinking"))
    kinds = [e["type"] for e in events if e["type"] in ("thinking", "text")]
    assert kinds == ["thinking", "text"]
    (usage,) = _of(events, "token/usage")
    assert usage["usage"]["reasoning_tokens"] > 0


@pytest.mark.parametrize(
    ("name", "code"), [("error500", "model_api_error"), ("error401", "model_auth_failed")]
)
def test_api_errors_end_the_turn_with_one_error(name: str, code: str) -> None:
    events, outcome, _ = replay(_case(name))
    errors = [e["props"] for e in events if e["type"] == "error"]
    assert [e["code"] for e in errors] == [code]
    assert outcome.status == "error" and outcome.error == errors[0]["message"]
    # the retry notice is a loading indicator, closed before the error
    loading = [e["props"]["message"] for e in events if e["type"] == "loading"]
    assert loading[0].startswith("Reconnecting...") and loading[-1] == ""
    assert _of(events, "stream_end")[0]["status"] == "error"


def test_cancelled_turn_has_no_error() -> None:
    events, outcome, resume = replay(_case("cancelled"))
    assert outcome.status == "cancelled"
    assert not [e for e in events if e["type"] == "error"]
    assert _of(events, "stream_end")[0]["status"] == "cancelled"
    assert "thread_id" in resume  # the thread can still be resumed


def test_lost_thread_fails_clearly_and_forgets_the_thread() -> None:
    events, outcome, resume = replay(_case("resume_lost"))
    (error,) = [e["props"] for e in events if e["type"] == "error"]
    assert error["code"] == "resume_failed"
    assert outcome.status == "error"
    assert resume == {}


def test_tools_cover_mcp_and_a_failing_command() -> None:
    events, _, _ = replay(_case("tools"))
    finished = [e["props"] for e in events if e["type"] == "execute" and e["props"]["status"] != "running"]
    assert [(f["tool"], f["status"]) for f in finished] == [
        ("mcp__echo__echo", "completed"),
        ("command_execution", "error"),
    ]
    assert finished[0]["output"] == "echo: hi there (env passed)"
    assert finished[1]["exit_code"] == 3 and finished[1]["output"] == "oops\n"


def test_file_change_and_collab_items() -> None:
    events, _, _ = replay(_case("patch"))
    done = [e["props"] for e in events if e["type"] == "execute" and e["props"]["status"] == "completed"]
    assert done[0]["tool"] == "file_change" and done[0]["summary"] == "add /workspace/notes.txt"
    events, _, _ = replay(_case("collab"))
    agents = [e for e in events if e["type"] == "agent"]
    assert [a["props"]["status"] for a in agents] == ["running", "completed"]
