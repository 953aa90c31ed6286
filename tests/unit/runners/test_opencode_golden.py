"""Replays every recorded opencode transcript (real CLI output) against its reviewed events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.stream import validate_stream
from tests.golden.opencode.record import GOLDEN_KEY
from tests.golden.opencode.replay import HERE, dump, replay_case

CASES = sorted(HERE.glob("*/*.in.jsonl"))
EXPECTED_STATUS = {
    "hello": "completed",
    "thinking": "completed",
    "error500": "error",
    "error401": "error",
    "resume": "completed",
    "cancelled": "cancelled",
    "serve_hello": "completed",
    "serve_thinking": "completed",
    "serve_error500": "error",
    "serve_resume": "completed",
    "serve_cancelled": "cancelled",
}


def _name(case: Path) -> str:
    return case.name.removesuffix(".in.jsonl")


def test_every_scenario_is_recorded() -> None:
    assert {_name(c) for c in CASES} >= set(EXPECTED_STATUS)


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_translation_matches_golden(case: Path) -> None:
    replay = replay_case(case)
    expected = case.with_name(case.name.replace(".in.jsonl", ".out.jsonl")).read_text(encoding="utf-8")
    assert dump(replay.events) == expected
    validate_stream(replay.events)
    assert replay.outcome.status == EXPECTED_STATUS[_name(case)]


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_golden_never_holds_the_key(case: Path) -> None:
    for sibling in case.parent.glob(_name(case) + ".*"):
        assert GOLDEN_KEY not in sibling.read_text(encoding="utf-8")


def _events(name: str) -> list[dict[str, object]]:
    path = HERE / "1.18.33" / f"{name}.out.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("name", ["hello", "serve_hello"])
def test_hello_runs_the_shell_tool_then_says_done(name: str) -> None:
    events = _events(name)
    tool = [e for e in events if e["type"] == "execute"]
    assert tool[0]["props"]["status"] == "running"  # type: ignore[index]
    assert tool[-1]["props"]["status"] == "completed"  # type: ignore[index]
    assert tool[-1]["props"]["summary"] == "echo hello > hello.txt"  # type: ignore[index]
    assert {e["message_id"] for e in tool} == {tool[0]["message_id"]}
    text = "".join(e["props"]["content"] for e in events if e["type"] == "text")  # type: ignore[index]
    assert text == "done"
    usage = [e for e in events if e["props"].get("event") == "token/usage"]  # type: ignore[union-attr]
    assert len(usage) == 1 and usage[0]["props"]["usage"]["input_tokens"] > 0  # type: ignore[index]


def test_serve_streams_deltas_and_never_repeats_text() -> None:
    events = _events("serve_thinking")
    thinking = [e["props"]["content"] for e in events if e["type"] == "thinking"]  # type: ignore[index]
    text = [e["props"]["content"] for e in events if e["type"] == "text"]  # type: ignore[index]
    assert len(text) > 1 and "".join(text) == "The answer is 42."
    assert "".join(thinking) == "Let me think about this."


def test_serve_resume_skips_the_echoed_prompt() -> None:
    contents = [e["props"]["content"] for e in _events("serve_resume") if e["type"] == "text"]  # type: ignore[index]
    assert "".join(contents) == "Hello from the fake model."


def test_resume_state_is_the_session_id() -> None:
    replay = replay_case(HERE / "1.18.33" / "resume.in.jsonl")
    meta = json.loads((HERE / "1.18.33" / "resume.meta.json").read_text())
    assert replay.resume_state == {"session_id": meta["resume"]["session_id"]}


def test_serve_cancel_fails_the_running_tool() -> None:
    events = _events("serve_cancelled")
    last_tool = [e for e in events if e["type"] == "execute"][-1]
    assert last_tool["props"]["status"] == "error"  # type: ignore[index]
    assert events[-1]["props"]["status"] == "cancelled"  # type: ignore[index]
