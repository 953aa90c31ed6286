"""`CodexTranslator` edge cases: bad lines, unknown types, huge outputs, exits, cancels, usage."""

from __future__ import annotations

import functools
import json
import random
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import ProtocolError
from orchestrator.stream import CountingIds, TurnBuilder, dump_event, validate_stream
from runners.base import ResumeRevisions, TurnOutcome, TurnRequest
from runners.codex import CodexAdapter, CodexTranslator
from runners.codex.items import OUTPUT_CHARS, one_line, tool_view, unwrap_shell
from runners.codex.usage import ThreadTotals

THREAD = "01a22830-216a-79c2-8e49-52d49bd95cd0"


@dataclass
class Run:
    events: list[dict[str, Any]]
    outcome: TurnOutcome
    translator: CodexTranslator

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e["props"] for e in self.events if e["type"] == kind]

    def lifecycle(self, event: str) -> list[dict[str, Any]]:
        return [p for p in self.of("event") if p["event"] == event]


def line(kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, **fields})


def item(phase: str, **fields: Any) -> str:
    return line(f"item.{phase}", item=fields)


def completed(input_tokens: int = 100, output_tokens: int = 10, **more: int) -> str:
    usage = {
        "input_tokens": input_tokens,
        "cached_input_tokens": 0,
        "cache_write_input_tokens": 0,
        "output_tokens": output_tokens,
        "reasoning_output_tokens": 0,
        **more,
    }
    return line("turn.completed", usage=usage)


def run(
    lines: list[str],
    *,
    exit_code: int | None = 0,
    stderr: str = "",
    cancelled: bool = False,
    resume: dict[str, str] | None = None,
) -> Run:
    builder = TurnBuilder(CountingIds(), runner="codex", clock=lambda: 0)
    turn = TurnRequest(
        assistant_id="a", owner="o", session_id="c", turn_id="t", prompt="p", resume=resume or {}
    )
    translator = CodexAdapter().translator(builder, turn)
    events = builder.stream_start("a")
    for text in lines:
        events += translator.feed(text)
    events += translator.close(exit_code, stderr, cancelled=cancelled)
    outcome = translator.outcome
    events += builder.stream_end(outcome.status, error=outcome.error, usage=outcome.usage)
    dumped = [dump_event(e) for e in events]
    assert validate_stream(dumped, stamped=False) == []
    return Run(dumped, outcome, translator)


START = [line("thread.started", thread_id=THREAD), line("turn.started")]


def test_malformed_and_non_object_lines_are_skipped() -> None:
    result = run([*START, "not json {", "[1, 2]", '"text"', "", "   ", completed()])
    assert result.outcome.status == "completed"
    assert result.lifecycle("runner/raw") == []
    assert not result.of("error")


def test_unknown_types_are_forwarded_raw() -> None:
    result = run(
        [
            *START,
            line("turn.progress", pct=50),
            item("completed", id="item_9", type="plan", text="x"),
            json.dumps({"no_type": True}),
            completed(),
        ]
    )
    raws = [(r["raw_type"], r["raw"]) for r in result.lifecycle("runner/raw")]
    assert raws == [
        ("turn.progress", {"type": "turn.progress", "pct": 50}),
        ("item.completed", {"id": "item_9", "type": "plan", "text": "x"}),
        ("unknown", {"no_type": True}),
    ]


def test_a_huge_unknown_line_is_forwarded_as_a_size_note() -> None:
    huge = line("mystery", blob="x" * 200_000)
    result = run([*START, huge, completed()])
    (raw,) = result.lifecycle("runner/raw")
    assert raw["raw"] == {"omitted_bytes": len(huge)}


def test_a_50_mb_tool_output_is_clipped_head_and_tail() -> None:
    output = "HEAD" + "y" * (50 * 1024 * 1024) + "TAIL"
    command = {"id": "item_1", "type": "command_execution", "command": "/bin/bash -lc 'cat big'"}
    started = time.monotonic()
    result = run(
        [
            *START,
            item("started", **command, aggregated_output="", exit_code=None, status="in_progress"),
            item("completed", **command, aggregated_output=output, exit_code=0, status="completed"),
            completed(),
        ]
    )
    assert time.monotonic() - started < 20
    final = result.of("execute")[-1]
    assert final["status"] == "completed"
    assert final["output"].startswith("HEAD") and final["output"].endswith("TAIL")
    assert "characters omitted" in final["output"] and len(final["output"]) < OUTPUT_CHARS + 100


def test_non_zero_exit_without_a_final_event_is_an_error_with_the_redacted_stderr() -> None:
    stderr = "Reading additional input from stdin...\npanic: key sk-abcdefghijklmnop1234 rejected\n"
    result = run(START, exit_code=101, stderr=stderr)
    (error,) = result.of("error")
    assert error["code"] == "runner_failed"
    assert "with code 101" in error["message"] and "panic: key" in error["message"]
    assert "sk-abcdefghijklmnop1234" not in error["message"] and "Reading additional" not in error["message"]
    assert result.outcome.status == "error" and result.outcome.error == error["message"]
    assert result.lifecycle("stream_end")[0]["status"] == "error"


def test_killed_without_exit_code() -> None:
    result = run(START, exit_code=None)
    assert "without an exit code" in result.of("error")[0]["message"]


def test_a_held_fatal_error_explains_a_bare_exit() -> None:
    result = run([*START, line("error", message="stream disconnected before completion")], exit_code=1)
    (error,) = result.of("error")
    assert error["message"] == "stream disconnected before completion"
    assert error["code"] == "model_api_error"


def test_a_non_retry_error_followed_by_completion_is_a_warning() -> None:
    result = run([*START, line("error", message="mcp server echo failed to start"), completed()])
    assert not result.of("error")
    assert [r["raw"] for r in result.lifecycle("runner/raw")] == [
        {"message": "mcp server echo failed to start"}
    ]
    assert result.outcome.status == "completed"


def test_turn_failed_with_rate_limit() -> None:
    result = run(
        [
            *START,
            line("error", message="exceeded retry limit, last status: 429 Too Many Requests"),
            line(
                "turn.failed", error={"message": "exceeded retry limit, last status: 429 Too Many Requests"}
            ),
        ],
        exit_code=1,
    )
    assert [e["code"] for e in result.of("error")] == ["model_rate_limited"]
    assert result.translator.finished
    assert result.lifecycle("result/summary")[0]["is_error"] is True


def test_cancel_fails_the_running_tool_and_reports_cancelled() -> None:
    command = {
        "id": "item_1",
        "type": "command_execution",
        "command": "/bin/bash -lc 'sleep 60'",
        "aggregated_output": "",
        "exit_code": None,
        "status": "in_progress",
    }
    result = run([*START, item("started", **command)], exit_code=1, cancelled=True)
    assert result.outcome.status == "cancelled" and not result.of("error")
    final = result.of("execute")[-1]
    assert final["status"] == "error" and "cancelled" in final["output"]
    assert not result.translator.finished


def test_cancel_after_the_turn_completed_keeps_it_completed() -> None:
    result = run([*START, completed()], exit_code=1, cancelled=True)
    assert result.outcome.status == "completed"


def test_close_is_idempotent_and_outcome_needs_close() -> None:
    builder = TurnBuilder(CountingIds())
    translator = CodexAdapter().translator(
        builder, TurnRequest(assistant_id="a", owner="o", session_id="c", turn_id="t", prompt="p")
    )
    with pytest.raises(ProtocolError, match="outcome read before close"):
        _ = translator.outcome
    assert translator.close(1, "boom") != []
    assert translator.close(1, "boom") == []


def test_a_tool_seen_only_completed_still_runs_first_and_duplicates_are_ignored() -> None:
    change = {
        "id": "item_3",
        "type": "file_change",
        "changes": [
            {"path": "/workspace/a.py", "kind": "update"},
            {"path": "/workspace/b.py", "kind": "add"},
        ],
        "status": "failed",
    }
    result = run([*START, item("completed", **change), item("completed", **change), completed()])
    executes = [e for e in result.events if e["type"] == "execute"]
    assert [e["props"]["status"] for e in executes] == ["running", "error"]
    assert len({e["message_id"] for e in executes}) == 1
    assert executes[0]["props"]["summary"] == "2 files: a.py, b.py"
    assert executes[1]["props"]["output"] == "update /workspace/a.py\nadd /workspace/b.py\npatch failed"


def test_todo_list_updates_and_finishes_with_the_turn() -> None:
    todo = {"id": "item_1", "type": "todo_list"}
    result = run(
        [
            *START,
            item(
                "started",
                **todo,
                items=[{"text": "write", "completed": False}, {"text": "test", "completed": False}],
            ),
            item(
                "updated",
                **todo,
                items=[{"text": "write", "completed": True}, {"text": "test", "completed": False}],
            ),
            completed(),
        ]
    )
    todos = [e for e in result.events if e["type"] == "todo"]
    assert [t["props"].get("status") for t in todos] == ["running", None, "completed"]
    assert todos[1]["props"]["summary"] == "1/2 done"
    assert todos[-1]["props"]["output"] == "[x] write\n[ ] test"


def test_web_search_and_mcp_failure() -> None:
    result = run(
        [
            *START,
            item("started", id="item_1", type="web_search", query="cage docker", action={"type": "search"}),
            item("completed", id="item_1", type="web_search", query="cage docker", action={"type": "search"}),
            item(
                "completed",
                id="item_2",
                type="mcp_tool_call",
                server="orch",
                tool="report",
                arguments={},
                result=None,
                error={"message": "tool timed out"},
                status="failed",
            ),
            completed(),
        ]
    )
    done = [e for e in result.of("execute") if e.get("status") in ("completed", "error")]
    assert [(d["tool"], d["status"], d["summary"]) for d in done] == [
        ("web_search", "completed", "cage docker"),
        ("mcp__orch__report", "error", "orch: report"),
    ]
    assert done[1]["output"] == "tool timed out"


def test_text_items_growing_are_never_emitted_twice() -> None:
    msg = {"id": "item_1", "type": "agent_message"}
    result = run(
        [
            *START,
            item("started", **msg, text="Hel"),
            item("updated", **msg, text="Hello"),
            item("completed", **msg, text="Hello world"),
            item("completed", id="item_2", type="agent_message", text="Second."),
            completed(),
        ]
    )
    deltas = [t["content"] for t in result.of("text")]
    assert deltas == ["Hel", "lo", " world", "Second."]
    ends = [p["content"] for p in result.lifecycle("message_end") if p["type"] == "text"]
    assert ends == ["Hello world", "Second."]
    assert result.lifecycle("result/summary")[0]["result"] == "Second."


def test_usage_is_per_turn_on_the_same_thread_only() -> None:
    resume = {"thread_id": THREAD, **ThreadTotals(1000, 200, 50, 5).to_resume()}
    same = run(
        [*START, completed(1500, 80, cached_input_tokens=300, reasoning_output_tokens=9)], resume=resume
    )
    usage = same.lifecycle("token/usage")[0]["usage"]
    assert (
        usage["input_tokens"],
        usage["cached_input_tokens"],
        usage["output_tokens"],
        usage["reasoning_tokens"],
    ) == (500, 100, 30, 4)
    assert same.translator.resume_state == {"thread_id": THREAD, **ThreadTotals(1500, 300, 80, 9).to_resume()}
    other = run([line("thread.started", thread_id="another"), completed(1500, 80)], resume=resume)
    assert other.lifecycle("token/usage")[0]["usage"]["input_tokens"] == 1500


def test_a_counter_going_down_means_codex_counted_afresh() -> None:
    usage = ThreadTotals(100, 0, 10, 0).since(ThreadTotals(1000, 0, 5, 0))
    assert (usage.input_tokens, usage.output_tokens, usage.scope) == (100, 10, "turn")


def test_resume_state_survives_a_turn_that_never_started() -> None:
    resume = {"thread_id": THREAD, "usage_input_tokens": "7", "other": "dropped"}
    result = run([], exit_code=2, stderr="Error loading config.toml", resume=resume)
    assert result.translator.resume_state == {"thread_id": THREAD, "usage_input_tokens": "7"}
    assert "Error loading config.toml" in result.of("error")[0]["message"]


def test_resume_state_follows_every_line_that_changes_it() -> None:
    """The bridge reads `resume_state` after every line: each read says what the lines so far say."""
    resume = {"thread_id": THREAD, **ThreadTotals(1000, 200, 50, 5).to_resume()}
    builder = TurnBuilder(CountingIds(), runner="codex", clock=lambda: 0)
    turn = TurnRequest(assistant_id="a", owner="o", session_id="c", turn_id="t", prompt="p", resume=resume)
    translator = CodexAdapter().translator(builder, turn)
    assert translator.resume_state == resume
    translator.feed(line("thread.started", thread_id="another"))  # codex started a new thread
    assert translator.resume_state == {"thread_id": "another", **ThreadTotals().to_resume()}
    translator.resume_state["thread_id"] = "changed by a reader"  # each read is the reader's own
    translator.feed(line("turn.started"))
    assert translator.resume_state["thread_id"] == "another"
    translator.feed(completed(1500, 80))
    assert translator.resume_state == {"thread_id": "another", **ThreadTotals(1500, 0, 80, 0).to_resume()}

    lost = CodexAdapter().translator(TurnBuilder(CountingIds(), runner="codex"), turn)
    lost.feed(line("thread.started", thread_id=THREAD))
    assert lost.resume_state == resume
    lost.close(1, f"Error: thread/resume failed: no rollout found for thread id {THREAD}")
    assert lost.resume_state == {}  # its session files are gone: the next turn starts afresh


@pytest.mark.parametrize(
    ("command", "script"),
    [
        ("/bin/bash -lc 'echo hello > hello.txt'", "echo hello > hello.txt"),
        ("/bin/bash -lc \"env | grep 'A'\"", "env | grep 'A'"),
        ("bash -c ls", "ls"),
        ("python3 run.py", "python3 run.py"),
        ("/bin/bash -lc 'unbalanced", "/bin/bash -lc 'unbalanced"),
    ],
)
def test_unwrap_shell(command: str, script: str) -> None:
    assert unwrap_shell(command) == script


def _unwrap_by_shlex(command: str) -> str:
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if len(words) == 3 and words[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh", "dash"):
        return words[2] if words[1] in ("-c", "-lc", "-cl") else command
    return command


@pytest.mark.parametrize("seed", range(20))
def test_unwrap_shell_reads_commands_as_shlex_does(seed: int) -> None:
    rng = random.Random(seed)
    pieces = [
        "/bin/bash",
        "bash",
        "sh",
        "-lc",
        "-c",
        "-cl",
        "-x",
        " ",
        "  ",
        "\t",
        "\n",
        "'",
        '"',
        "\\",
        "a b",
    ]
    pieces += ["echo hi > f.txt", "#", "$HOME", "é", "\x0b", "'it''s'", "/usr/bin/zsh", "/bin/bash -lc 'ls'"]
    for _ in range(300):
        command = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 9)))
        assert unwrap_shell(command) == _unwrap_by_shlex(command), repr(command)
    for script in ("echo 'x'", "a\\b", "ls -la\ncat f", "", "$(rm -rf /)"):
        wrapped = f"/bin/bash -lc {shlex.quote(script)}"
        assert unwrap_shell(wrapped) == _unwrap_by_shlex(wrapped) == script


@pytest.mark.parametrize(
    "text",
    ["", "   ", "ls -la", "  cd /tmp  ", "\n\n  first\nsecond", "a\rb", "\u2028x", "  \n\t\n", "é" * 200],
)
def test_one_line_is_the_first_non_empty_line(text: str) -> None:
    first = next((part.strip() for part in text.splitlines() if part.strip()), "")
    assert one_line(text) == (first if len(first) <= 120 else first[:119] + "…")


@pytest.mark.parametrize("size", [10, 5000])  # looked up in the command cache, and too long for it
def test_a_command_reads_the_same_started_and_completed(size: int) -> None:
    script = "cat > notes.txt <<EOF\n" + "x" * size + "\nEOF"
    item = {"id": "item_1", "type": "command_execution", "command": f"/bin/bash -lc '{script}'"}
    started, completed = tool_view({**item, "status": "in_progress"}), tool_view({**item, "exit_code": 0})
    assert started is not None and completed is not None
    assert started.input == completed.input == {"command": script}
    assert started.summary == completed.summary == "cat > notes.txt <<EOF"


@pytest.mark.parametrize(
    "case",
    sorted((Path(__file__).parents[2] / "golden" / "codex").glob("*/*.in.jsonl")),
    ids=lambda p: p.name,
)
def test_the_resume_revision_moves_with_every_change_of_the_resume_state(case: Path) -> None:
    """The bridge reads `resume_state` only after a line that moved `resume_revision`
    (`ResumeRevisions`): a change it does not count would be saved only at the turn's end."""
    resume = {"thread_id": THREAD, **ThreadTotals(1000, 200, 50, 5).to_resume()}
    for given in ({}, resume):
        turn = TurnRequest(assistant_id="a", owner="o", session_id="c", turn_id="t", prompt="p", resume=given)
        translator = CodexAdapter().translator(TurnBuilder(CountingIds(), runner="codex"), turn)
        assert isinstance(translator, ResumeRevisions)
        state, revision = translator.resume_state, translator.resume_revision
        lines = case.read_text(encoding="utf-8").splitlines()
        steps: list[Callable[[], object]] = [functools.partial(translator.feed, text) for text in lines]
        steps.append(functools.partial(translator.close, 1, f"no rollout found for thread id {THREAD}"))
        for step in steps:
            step()
            if translator.resume_state != state:
                assert translator.resume_revision > revision
            assert translator.resume_revision >= revision
            state, revision = translator.resume_state, translator.resume_revision
