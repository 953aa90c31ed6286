"""Translator edge cases for both opencode drives (hand-written lines shaped like the real ones)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orchestrator.stream import CountingIds, Event, TurnBuilder, dump_event, validate_stream
from runners.base import Translator
from runners.opencode import RunTranslator, ServeTranslator

SES = "ses_test123"


def _builder() -> TurnBuilder:
    return TurnBuilder(CountingIds(), runner="opencode", clock=lambda: 0)


def _run(lines: list[Any], exit_code: int | None = 0, stderr: str = "", *, cancelled: bool = False,
         serve: bool = False) -> tuple[Translator, list[dict[str, Any]]]:  # fmt: skip
    builder = _builder()
    tr: Translator = ServeTranslator(builder) if serve else RunTranslator(builder)
    events: list[Event] = builder.stream_start("a.b")
    for line in lines:
        events += tr.feed(line if isinstance(line, str) else json.dumps(line))
    events += tr.close(exit_code, stderr, cancelled=cancelled)
    events += builder.stream_end(tr.outcome.status, error=tr.outcome.error)
    validate_stream(events)
    return tr, [dump_event(e) for e in events]


def _tool_use(output: str, status: str = "completed") -> dict[str, Any]:
    state: dict[str, Any] = {"status": status, "input": {"command": "cat big"}, "title": "cat big"}
    state.update({"output": output, "metadata": {"exit": 0}} if status == "completed" else {"error": output})
    return {
        "type": "tool_use",
        "sessionID": SES,
        "part": {"type": "tool", "tool": "bash", "callID": "c1", "state": state},
    }


STOP = {"type": "step_finish", "sessionID": SES, "part": {"type": "step-finish", "reason": "stop",
        "tokens": {"input": 100, "output": 10, "reasoning": 4, "cache": {"read": 50, "write": 5}}, "cost": 0.25}}  # fmt: skip


def test_malformed_and_empty_lines_are_skipped() -> None:
    tr, events = _run(["", "not json", "[1,2]", '{"no":"type"}', STOP])
    assert tr.outcome.status == "completed"
    assert [e["props"].get("event") for e in events if e["type"] == "event"][-1] == "stream_end"


def test_unknown_type_is_forwarded_raw() -> None:
    _, events = _run([{"type": "brand_new", "sessionID": SES, "x": 1}, STOP])
    raw = [e for e in events if e["props"].get("event") == "runner/raw"]
    assert raw and raw[0]["props"]["raw_type"] == "brand_new" and raw[0]["props"]["raw"]["x"] == 1


def test_usage_is_normalised_and_summed_once_per_turn() -> None:
    tool_step = {**STOP, "part": {**STOP["part"], "reason": "tool-calls"}}
    tr, events = _run([tool_step, STOP])
    usage = [e["props"]["usage"] for e in events if e["props"].get("event") == "token/usage"]
    assert usage == [{"input_tokens": 310, "cached_input_tokens": 110, "output_tokens": 28,
                      "reasoning_tokens": 8, "cost_usd": 0.5, "scope": "turn"}]  # fmt: skip
    assert tr.finished and tr.resume_state == {"session_id": SES}
    assert tr.outcome.usage is not None and tr.outcome.usage.total_tokens == 338


def test_a_50mb_tool_result_is_cut_not_fatal() -> None:
    _, events = _run([_tool_use("y" * 50_000_000), STOP])
    done = [e for e in events if e["type"] == "execute" and e["props"].get("status") == "completed"]
    assert done and len(done[0]["props"]["output"]) < 1_100_000
    assert done[0]["props"]["output"].endswith("more characters cut by Cage]")


def test_tool_error_is_an_error_run() -> None:
    _, events = _run([_tool_use("The user rejected permission", status="error"), STOP])
    last = [e for e in events if e["type"] == "execute"][-1]["props"]
    assert last["status"] == "error" and last["is_error"] is True and "rejected" in last["output"]


def test_non_zero_exit_without_a_result_is_an_error_with_redacted_stderr() -> None:
    tr, events = _run([], exit_code=1, stderr="boom: api_key=sk-abcdefghijklmnop")
    errors = [e for e in events if e["type"] == "error"]
    assert tr.outcome.status == "error" and errors[0]["props"]["code"] == "runner_exit"
    assert "exited with code 1" in errors[0]["props"]["message"]
    assert "sk-abcdefghijklmnop" not in json.dumps(events)


def test_exit_zero_with_no_output_is_an_error() -> None:
    tr, _ = _run([], exit_code=0)
    assert tr.outcome.status == "error" and tr.outcome.error == "opencode ended without reporting anything"


def test_api_error_line_sets_the_error_outcome() -> None:
    error = {"type": "error", "sessionID": SES, "error": {"name": "APIError", "data": {
        "message": "Unauthorized", "statusCode": 401, "isRetryable": False}}}  # fmt: skip
    tr, events = _run([error], exit_code=1)
    (err,) = [e for e in events if e["type"] == "error"]
    assert err["props"]["code"] == "auth_error" and "HTTP 401" in err["props"]["message"]
    assert tr.outcome.status == "error" and tr.outcome.error is not None


def test_cancel_wins_and_closes_open_text() -> None:
    text = {"type": "text", "sessionID": SES, "part": {"type": "text", "text": "partial"}}
    tr, events = _run([text], exit_code=130, cancelled=True)
    assert tr.outcome.status == "cancelled"
    ends = [e for e in events if e["props"].get("event") == "message_end"]
    assert ends[0]["props"]["status"] == "cancelled"
    assert not [e for e in events if e["type"] == "error"]


def _serve(kind: str, **props: Any) -> dict[str, Any]:
    return {"id": "evt", "type": kind, "properties": {"sessionID": SES, **props}}


def _part(**part: Any) -> dict[str, Any]:
    return _serve("message.part.updated", part={"sessionID": SES, "messageID": "msg_a", **part})


def test_serve_final_part_only_adds_what_deltas_missed() -> None:
    lines = [
        _serve("cage.driver.session", sessionID=SES, resumed=False, server="started"),
        _part(id="p1", type="text", text=""),
        _serve("message.part.delta", messageID="msg_a", partID="p1", field="text", delta="Hel"),
        _part(id="p1", type="text", text="Hello"),
        _part(id="p1", type="text", text="Hello"),
        _serve("session.status", status={"type": "busy"}),
        _serve("session.status", status={"type": "idle"}),
    ]
    tr, events = _run(lines, serve=True)
    assert [e["props"]["content"] for e in events if e["type"] == "text"] == ["Hel", "lo"]
    assert tr.finished and tr.resume_state == {"session_id": SES}


def test_serve_tool_states_share_one_message_and_input_arrives_later() -> None:
    lines = [
        _part(id="t", type="tool", tool="bash", callID="c9", state={"status": "pending", "input": {}}),
        _part(id="t", type="tool", tool="bash", callID="c9", state={"status": "running", "input": {"command": "ls"}}),
        _part(id="t", type="tool", tool="bash", callID="c9",
              state={"status": "completed", "input": {"command": "ls"}, "output": "a\n", "metadata": {"exit": 0}}),
        _part(id="t", type="tool", tool="bash", callID="c9",
              state={"status": "completed", "input": {"command": "ls"}, "output": "a\n", "metadata": {"exit": 0}}),
        _serve("session.idle"),
    ]  # fmt: skip
    _, events = _run(lines, serve=True)
    tool = [e for e in events if e["type"] == "execute"]
    assert [e["props"].get("status") for e in tool] == ["running", None, "completed"]
    assert tool[1]["props"]["summary"] == "ls" and len({e["message_id"] for e in tool}) == 1


def test_serve_driver_error_is_an_error_turn() -> None:
    tr, events = _run(
        [_serve("cage.driver.error", message="opencode serve exited with 1")], exit_code=1, serve=True
    )
    assert tr.outcome.status == "error" and tr.outcome.error == "opencode serve exited with 1"
    assert [e["props"]["code"] for e in events if e["type"] == "error"] == ["runner_error"]


def test_serve_abort_error_is_a_cancel_not_an_error() -> None:
    lines = [
        _serve("session.status", status={"type": "busy"}),
        _serve("session.error", error={"name": "MessageAbortedError", "data": {"message": "Aborted"}}),
        _serve("session.status", status={"type": "idle"}),
    ]
    tr, events = _run(lines, exit_code=130, cancelled=True, serve=True)
    assert tr.outcome.status == "cancelled" and not [e for e in events if e["type"] == "error"]


@pytest.mark.parametrize("kind", ["permission.asked", "todo.updated"])
def test_serve_unknown_events_are_forwarded_raw(kind: str) -> None:
    _, events = _run([_serve(kind, x=1), _serve("session.idle")], serve=True)
    assert [e["props"]["raw_type"] for e in events if e["props"].get("event") == "runner/raw"] == [kind]


def test_serve_skips_the_users_own_prompt() -> None:
    lines = [
        _serve("message.updated", info={"id": "msg_u", "role": "user", "sessionID": SES}),
        _serve(
            "message.part.updated",
            part={"id": "pu", "type": "text", "text": "my prompt", "messageID": "msg_u"},
        ),
        _serve("session.idle"),
    ]
    _, events = _run(lines, serve=True)
    assert not [e for e in events if e["type"] == "text"]
