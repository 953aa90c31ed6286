"""`ClaudeTranslator` edge cases on hand-written stream-json lines; every stream must validate."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from orchestrator.stream import CountingIds, Event, TurnBuilder, dump_event, validate_stream
from runners.base import TurnOutcome
from runners.claude import ClaudeTranslator
from runners.claude.payload import OUTPUT_MAX

SID = "0b6f3c1e-0000-5000-8000-000000000001"


def line(**message: Any) -> str:
    return json.dumps({"session_id": SID, **message})


def event(parent: str | None = None, **sse: Any) -> str:
    return line(type="stream_event", event=sse, parent_tool_use_id=parent)


def assistant(
    *content: dict[str, Any], message_id: str = "msg_1", parent: str | None = None, **extra: Any
) -> str:
    body = {"id": message_id, "role": "assistant", "content": list(content), "stop_reason": None}
    return line(type="assistant", message=body, parent_tool_use_id=parent, **extra)


def tool_result(tool_id: str, content: Any, *, is_error: bool = False, parent: str | None = None) -> str:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": content, "is_error": is_error}
    return line(type="user", message={"role": "user", "content": [block]}, parent_tool_use_id=parent)


def result(**over: Any) -> str:
    values: dict[str, Any] = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "done",
        "num_turns": 1,
        "duration_ms": 5,
        "stop_reason": "end_turn",
        "terminal_reason": "completed",
        "total_cost_usd": 0.5,
        "usage": {
            "input_tokens": 100,
            "cache_read_input_tokens": 30,
            "cache_creation_input_tokens": 20,
            "output_tokens": 7,
        },
    }
    values.update(over)
    return line(**values)


def run(
    lines: list[str], *, exit_code: int | None = 0, stderr: str = "", cancelled: bool = False
) -> tuple[list[dict[str, Any]], TurnOutcome, ClaudeTranslator]:
    """Feed `lines`, close, wrap in stream_start/end; the stream must be valid."""
    builder = TurnBuilder(CountingIds(), runner="claude", clock=lambda: 0)
    translator = ClaudeTranslator(builder, session_id=SID)
    events: list[Event] = builder.stream_start("demo.claude")
    for item in lines:
        events += translator.feed(item)
    events += translator.close(exit_code, stderr, cancelled=cancelled)
    outcome = translator.outcome
    events += builder.stream_end(outcome.status, error=outcome.error, usage=outcome.usage)
    dumped = [dump_event(e) for e in events]
    assert validate_stream(dumped, stamped=False) == []
    return dumped, outcome, translator


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def lifecycle(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e["props"] for e in events if e["type"] == "event" and e["props"]["event"] == name]


def texts(events: list[dict[str, Any]], kind: str = "text") -> str:
    return "".join(e["props"]["content"] for e in of_type(events, kind))


def test_malformed_and_non_object_lines_are_skipped() -> None:
    events, outcome, _ = run(
        ["{not json", "[1, 2]", "42", "", "   ", assistant({"type": "text", "text": "hi"}), result()]
    )
    assert texts(events) == "hi"
    assert outcome.status == "completed"
    assert lifecycle(events, "runner/raw") == []


def test_unknown_message_type_is_forwarded_raw() -> None:
    events, _, _ = run([line(type="rate_limit_event", info={"remaining": 3}), result()])
    (raw,) = lifecycle(events, "runner/raw")
    assert raw["raw_type"] == "rate_limit_event"
    assert raw["raw"]["info"] == {"remaining": 3}


def test_unknown_system_subtype_and_stream_event_are_forwarded_raw() -> None:
    events, _, _ = run(
        [line(type="system", subtype="hook_started", hook="x"), event(type="surprise"), result()]
    )
    assert [r["raw_type"] for r in lifecycle(events, "runner/raw")] == [
        "system/hook_started",
        "stream_event/surprise",
    ]


def test_raw_payload_is_redacted_and_bounded() -> None:
    events, _, _ = run([line(type="odd", api_key="sk-ant-abcdefghijkl1234", blob="x" * 200_000), result()])
    (raw,) = lifecycle(events, "runner/raw")
    dumped = json.dumps(raw)
    assert "sk-ant-abcdefghijkl1234" not in dumped
    assert raw["raw"]["truncated"] is True and len(dumped) < 10_000


def test_text_without_partial_messages_comes_from_the_whole_message() -> None:
    events, _, _ = run(
        [
            assistant({"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Hello"}),
            assistant({"type": "text", "text": " world"}, message_id="msg_2"),
            result(result="Hello world"),
        ]
    )
    assert texts(events, "thinking") == "hmm"
    assert texts(events) == "Hello world"


def test_whole_message_adds_only_what_the_deltas_missed() -> None:
    events, _, _ = run(
        [
            event(type="message_start", message={"id": "msg_1"}),
            event(type="content_block_start", index=0, content_block={"type": "text", "text": ""}),
            event(type="content_block_delta", index=0, delta={"type": "text_delta", "text": "Hel"}),
            assistant({"type": "text", "text": "Hello"}),
            event(type="content_block_delta", index=0, delta={"type": "text_delta", "text": "lo"}),
            event(type="content_block_stop", index=0),
            event(type="message_stop"),
            result(result="Hello"),
        ]
    )
    assert texts(events) == "Hello"


def test_two_blocks_of_one_message_are_matched_in_order() -> None:
    events, _, _ = run(
        [
            event(type="message_start", message={"id": "msg_1"}),
            event(type="content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}),
            event(type="content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "plan"}),
            event(type="content_block_delta", index=0, delta={"type": "signature_delta", "signature": "s"}),
            assistant({"type": "thinking", "thinking": "plan", "signature": "s"}),
            event(type="content_block_stop", index=0),
            event(type="content_block_start", index=1, content_block={"type": "text", "text": ""}),
            event(type="content_block_delta", index=1, delta={"type": "text_delta", "text": "ok"}),
            assistant({"type": "text", "text": "ok"}),
            event(type="content_block_stop", index=1),
            result(result="ok"),
        ]
    )
    assert texts(events, "thinking") == "plan"
    assert texts(events) == "ok"


def test_tool_input_streamed_without_whole_message_gets_input_and_summary() -> None:
    events, _, _ = run(
        [
            event(type="message_start", message={"id": "msg_1"}),
            event(
                type="content_block_start",
                index=0,
                content_block={"type": "tool_use", "id": "tu_1", "name": "Read", "input": {}},
            ),
            event(
                type="content_block_delta",
                index=0,
                delta={"type": "input_json_delta", "partial_json": '{"file_'},
            ),
            event(
                type="content_block_delta",
                index=0,
                delta={"type": "input_json_delta", "partial_json": 'path": "/a.py"}'},
            ),
            event(type="content_block_stop", index=0),
            tool_result("tu_1", [{"type": "text", "text": "print(1)"}, {"type": "image", "source": {}}]),
            result(),
        ]
    )
    runs = of_type(events, "execute")
    assert {e["message_id"] for e in runs} == {"execute-1"}
    assert [e["props"]["input_delta"] for e in runs if e["props"].get("input_delta")] == [
        '{"file_',
        'path": "/a.py"}',
    ]
    assert any(e["props"].get("summary") == "/a.py" for e in runs)
    assert runs[-1]["props"]["output"] == "print(1)\n[image]"
    assert runs[-1]["props"]["input"] == {"file_path": "/a.py"}


@pytest.mark.parametrize(
    ("tool", "input", "kind", "summary"),
    [
        ("Task", {"description": "Explore repo", "prompt": "..."}, "agent", "Explore repo"),
        ("Agent", {"description": "Review", "subagent_type": "x"}, "agent", "Review"),
        (
            "TodoWrite",
            {
                "todos": [
                    {"content": "a", "status": "completed"},
                    {"content": "b", "activeForm": "Doing b", "status": "in_progress"},
                ]
            },
            "todo",
            "1/2 done: Doing b",
        ),
        ("ExitPlanMode", {"plan": "1. do it\n2. check"}, "plan", "1. do it 2. check"),
        (
            "AskUserQuestion",
            {"questions": [{"question": "Which one?", "options": []}]},
            "question",
            "Which one?",
        ),
        ("TaskCreate", {"subject": "build"}, "job", "build"),
        ("Bash", {"command": "x" * 300}, "execute", "x" * 119 + "…"),
        ("Grep", {"pattern": "TODO", "path": "src"}, "execute", "TODO in src"),
        ("mcp__orch__report", {"message": "hi"}, "execute", "hi"),
    ],
)
def test_tools_get_semantic_types_and_summaries(
    tool: str, input: dict[str, Any], kind: str, summary: str
) -> None:
    events, _, _ = run(
        [
            assistant({"type": "tool_use", "id": "tu_1", "name": tool, "input": input}),
            tool_result("tu_1", "ok"),
            result(),
        ]
    )
    runs = [e for e in events if e.get("message_id") == f"{kind}-1" and e["type"] == kind]
    assert runs[0]["props"]["status"] == "running" and runs[0]["props"]["summary"] == summary
    assert runs[-1]["props"]["status"] == "completed" and runs[-1]["props"]["output"] == "ok"


def test_sub_agent_tools_keep_their_parent() -> None:
    events, _, _ = run(
        [
            assistant({"type": "tool_use", "id": "tu_task", "name": "Task", "input": {"description": "d"}}),
            assistant(
                {"type": "tool_use", "id": "tu_sub", "name": "Bash", "input": {"command": "ls"}},
                message_id="msg_sub",
                parent="tu_task",
            ),
            tool_result("tu_sub", "a.txt", parent="tu_task"),
            tool_result("tu_task", "found a.txt"),
            result(),
        ]
    )
    sub = [e for e in of_type(events, "execute") if e["props"].get("tool_id") == "tu_sub"]
    assert sub[0]["props"]["parent_tool_use_id"] == "tu_task"
    agent = of_type(events, "agent")
    assert agent[-1]["props"]["output"] == "found a.txt"


def test_a_50_mb_tool_result_is_cut_and_translated_quickly() -> None:
    huge = tool_result("tu_1", "y" * (50 * 1024 * 1024))
    started = time.monotonic()
    events, outcome, _ = run(
        [
            assistant({"type": "tool_use", "id": "tu_1", "name": "Bash", "input": {"command": "cat big"}}),
            huge,
            result(),
        ]
    )
    assert time.monotonic() - started < 20
    output = of_type(events, "execute")[-1]["props"]["output"]
    assert output.startswith("y" * 1000) and "more characters not shown" in output
    assert len(output) < OUTPUT_MAX + 100
    assert outcome.status == "completed"


def test_result_usage_is_normalised_once() -> None:
    events, outcome, _ = run([result()])
    (usage,) = lifecycle(events, "token/usage")
    assert usage["usage"] == {
        "input_tokens": 150,
        "cached_input_tokens": 50,
        "output_tokens": 7,
        "reasoning_tokens": 0,
        "cost_usd": 0.5,
        "scope": "turn",
    }
    (summary,) = lifecycle(events, "result/summary")
    assert summary["runner_session_id"] == SID and summary["cost_usd"] == 0.5
    assert outcome.usage is not None and outcome.usage.input_tokens == 150


def test_finished_only_after_result() -> None:
    builder = TurnBuilder(CountingIds(), runner="claude")
    translator = ClaudeTranslator(builder)
    builder.stream_start("demo.claude")
    translator.feed(line(type="system", subtype="init", session_id="s-from-init"))
    assert translator.finished is False
    assert translator.resume_state == {"session_id": "s-from-init"}
    translator.feed(result())
    assert translator.finished is True


def test_nonzero_exit_without_result_is_an_error_with_the_redacted_stderr_tail() -> None:
    stderr = "boot\nError: connect ECONNREFUSED; key sk-ant-abcdefghijkl9999 rejected\n"
    events, outcome, _ = run([assistant({"type": "text", "text": "partial"})], exit_code=1, stderr=stderr)
    (error,) = of_type(events, "error")
    assert error["props"]["code"] == "runner_failed"
    assert error["props"]["details"] == {"exit_code": 1}
    assert "exited with code 1" in error["props"]["message"] and "ECONNREFUSED" in error["props"]["message"]
    assert "sk-ant-abcdefghijkl9999" not in json.dumps(events)
    assert outcome.status == "error" and outcome.error is not None and "ECONNREFUSED" in outcome.error
    assert "sk-ant-abcdefghijkl9999" not in outcome.error


def test_exit_zero_without_result_is_an_error() -> None:
    events, outcome, _ = run([], exit_code=0)
    assert outcome.status == "error"
    assert "without reporting a result" in of_type(events, "error")[0]["props"]["message"]


def test_killed_without_result_after_an_api_error_reports_that_error() -> None:
    synthetic = assistant({"type": "text", "text": "API Error: 529 overloaded"}, error="server_error")
    events, outcome, _ = run([synthetic], exit_code=None)
    assert texts(events) == ""
    assert of_type(events, "error")[0]["props"]["message"] == "API Error: 529 overloaded"
    assert outcome.status == "error"


def test_cancelled_without_result_is_cancelled_and_fails_the_running_tool() -> None:
    events, outcome, _ = run(
        [assistant({"type": "tool_use", "id": "tu_1", "name": "Bash", "input": {"command": "sleep 60"}})],
        exit_code=None,
        cancelled=True,
    )
    assert outcome.status == "cancelled"
    assert of_type(events, "error") == []
    assert of_type(events, "execute")[-1]["props"]["status"] == "error"  # failed by stream_end


def test_interrupt_result_is_cancelled_even_if_the_bridge_did_not_say_so() -> None:
    events, outcome, _ = run(
        [
            line(type="control_response", response={"subtype": "success", "request_id": "cage-interrupt"}),
            line(
                type="user",
                message={
                    "role": "user",
                    "content": [{"type": "text", "text": "[Request interrupted by user]"}],
                },
            ),
            result(
                subtype="error_during_execution",
                is_error=True,
                terminal_reason="aborted_streaming",
                result=None,
            ),
        ],
        exit_code=1,
    )
    assert outcome.status == "cancelled" and outcome.stop_reason == "aborted_streaming"
    assert of_type(events, "error") == []


def test_success_result_then_killed_for_lingering_is_still_completed() -> None:
    _, outcome, _ = run([result()], exit_code=None, stderr="Killed")
    assert outcome.status == "completed" and outcome.error is None


def test_error_during_execution_names_the_cli_errors() -> None:
    events, outcome, _ = run(
        [
            result(
                subtype="error_during_execution", is_error=True, result=None, errors=["No conversation found"]
            )
        ],
        exit_code=1,
        stderr="No conversation found with session ID: x",
    )
    (error,) = of_type(events, "error")
    assert error["props"]["message"] == "No conversation found" and error["props"]["code"] == "runner_failed"
    assert outcome.status == "error" and outcome.error is not None and "stderr:" in outcome.error


def test_max_turns_is_an_error_with_its_own_code() -> None:
    events, outcome, _ = run(
        [result(subtype="error_max_turns", is_error=True, num_turns=3, result=None)], exit_code=1
    )
    assert of_type(events, "error")[0]["props"]["code"] == "max_turns"
    assert outcome.status == "error"


def test_failed_mcp_servers_in_init_are_forwarded() -> None:
    init = line(
        type="system",
        subtype="init",
        mcp_servers=[{"name": "a", "status": "connected"}, {"name": "b", "status": "failed"}],
    )
    events, _, _ = run([init, result()])
    (raw,) = lifecycle(events, "runner/raw")
    assert raw["raw"] == {"mcp_servers": [{"name": "b", "status": "failed"}]}


def test_close_is_idempotent() -> None:
    builder = TurnBuilder(CountingIds(), runner="claude")
    translator = ClaudeTranslator(builder)
    builder.stream_start("demo.claude")
    first = translator.close(2, "boom")
    assert len(first) > 0
    assert translator.close(2, "boom") == []
    assert translator.outcome.status == "error"


def test_duplicate_tool_result_is_ignored() -> None:
    events, _, _ = run(
        [
            assistant({"type": "tool_use", "id": "tu_1", "name": "Bash", "input": {"command": "ls"}}),
            tool_result("tu_1", "a"),
            tool_result("tu_1", "a"),
            assistant({"type": "tool_use", "id": "tu_1", "name": "Bash", "input": {"command": "ls"}}),
            result(),
        ]
    )
    finished = [e for e in of_type(events, "execute") if e["props"].get("status") == "completed"]
    assert len(finished) == 1
