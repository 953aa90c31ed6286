"""Event models: round trips, closed unions, frozen instances, compact wire form, Usage arithmetic."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from orchestrator.stream import (
    ErrorEvent,
    ErrorProps,
    Event,
    EventAdapter,
    ExecuteEvent,
    ExecuteProps,
    LifecycleEvent,
    LoadingEvent,
    LoadingProps,
    MessageEnd,
    MessageStart,
    PermissionRequest,
    PermissionResolved,
    ResultSummary,
    RunnerRaw,
    SandboxStatus,
    StreamEnd,
    StreamStart,
    TextEvent,
    TextProps,
    ThinkingEvent,
    ThinkingProps,
    TokenUsage,
    ToolCallEvent,
    ToolCallProps,
    TurnStalled,
    Usage,
    dump_event,
    event_json,
    parse_event,
)

SAMPLES: list[Event] = [
    TextEvent(
        message_id="m1", chunk_id="c1", delta=True, delta_action="append", props=TextProps(content="hi")
    ),
    ThinkingEvent(message_id="m2", delta=True, props=ThinkingProps(content="hmm")),
    ToolCallEvent(props=ToolCallProps(index=1, id="call_1", name="search", arguments='{"q":')),
    ExecuteEvent(
        props=ExecuteProps(tool_id="t1", tool="Bash", input={"command": "ls", "env": None}, status="running")
    ),
    ExecuteEvent(type="agent", props=ExecuteProps(tool_id="t2", tool="Task", parent_tool_use_id="t1")),
    LoadingEvent(props=LoadingProps(message="Preparing...")),
    ErrorEvent(props=ErrorProps(message="boom", code="runner_failed", details={"exit_code": 2})),
    LifecycleEvent(props=StreamStart(assistant_id="a.b", runner="claude", metadata={"k": [1, "x"]})),
    LifecycleEvent(props=StreamEnd(status="cancelled", duration_ms=12, usage=Usage(input_tokens=3))),
    LifecycleEvent(props=MessageStart(message_id="m1", type="text")),
    LifecycleEvent(props=MessageEnd(message_id="m1", type="text", content="hi there")),
    LifecycleEvent(
        props=MessageEnd(message_id="x", type="execute", content=ExecuteProps(tool_id="t", output="o"))
    ),
    LifecycleEvent(
        props=MessageEnd(message_id="y", type="tool_call", content=ToolCallProps(id="c", arguments="{}"))
    ),
    LifecycleEvent(props=TokenUsage(usage=Usage(output_tokens=5, cost_usd=0.01, scope="turn"))),
    LifecycleEvent(props=ResultSummary(result="done", num_turns=2, stop_reason="end_turn", cost_usd=0.5)),
    LifecycleEvent(props=SandboxStatus(phase="pulling", message="pulling image", progress=0.5)),
    LifecycleEvent(props=PermissionRequest(request_id="r1", tool="Write", input={"path": "/etc"})),
    LifecycleEvent(props=PermissionResolved(request_id="r1", decision="deny", by="policy")),
    LifecycleEvent(props=TurnStalled(idle_ms=60_000)),
    LifecycleEvent(
        thread_id="th1", props=RunnerRaw(runner="codex", raw_type="mystery", raw={"a": [1, None]})
    ),
]


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.props.event if e.type == "event" else e.type)
def test_every_event_round_trips_through_json_and_dicts(event: Event) -> None:
    assert parse_event(event_json(event)) == event
    assert parse_event(dump_event(event)) == event
    assert type(parse_event(dump_event(event))) is type(event)


def test_wire_form_omits_none_but_keeps_nulls_inside_free_json() -> None:
    data = json.loads(event_json(SAMPLES[3]))
    assert "message_id" not in data and "thread_id" not in data and "delta" not in data
    assert "output" not in data["props"] and "exit_code" not in data["props"]
    assert data["props"]["input"] == {"command": "ls", "env": None}
    assert data["v"] == 1 and data["type"] == "execute"
    assert "\n" not in event_json(TextEvent(props=TextProps(content="a\nb")))


def _text_event_data(**extra: Any) -> dict[str, Any]:
    return {"v": 1, "type": "text", "props": {"content": "x"}, **extra}


def test_unknown_envelope_field_is_rejected() -> None:
    with pytest.raises(ValidationError, match="surprise"):
        parse_event(_text_event_data(surprise=1))


def test_unknown_props_field_is_rejected() -> None:
    with pytest.raises(ValidationError, match="colour"):
        parse_event({"type": "text", "props": {"content": "x", "colour": "red"}})


def test_unknown_type_is_rejected() -> None:
    with pytest.raises(ValidationError, match="union_tag_invalid"):
        EventAdapter.validate_python({"type": "image", "props": {"url": "x"}}, strict=False)


def test_unknown_lifecycle_event_is_rejected() -> None:
    with pytest.raises(ValidationError):
        parse_event({"type": "event", "props": {"event": "block_start"}})


def test_other_protocol_versions_are_rejected() -> None:
    with pytest.raises(ValidationError):
        parse_event(_text_event_data(v=2))


def test_delta_action_is_a_closed_set() -> None:
    with pytest.raises(ValidationError):
        parse_event(_text_event_data(delta_action="prepend"))


def test_semantic_alias_parses_as_execute_event() -> None:
    event = parse_event({"type": "todo", "props": {"tool_id": "t", "tool": "TodoWrite"}})
    assert isinstance(event, ExecuteEvent) and event.type == "todo"


def test_events_are_frozen() -> None:
    event = SAMPLES[0]
    with pytest.raises(ValidationError):
        event.seq = 5  # type: ignore[misc]
    with pytest.raises(ValidationError):
        event.props.content = "changed"  # type: ignore[misc, union-attr]


def test_execute_props_merge_replaces_present_fields_and_appends_input_fragments() -> None:
    props = ExecuteProps(tool_id="t", tool="Bash", status="running", input_delta='{"a"')
    merged = props.merged(ExecuteProps(tool_id="t", input_delta=": 1}", summary="a=1"))
    assert merged.input_delta == '{"a": 1}'
    assert (merged.tool, merged.status, merged.summary) == ("Bash", "running", "a=1")
    assert merged.merged(ExecuteProps(tool_id="t", status="completed")).status == "completed"


def test_usage_adds_up_and_keeps_unknown_cost_unknown() -> None:
    a = Usage(input_tokens=10, cached_input_tokens=4, output_tokens=3, reasoning_tokens=1)
    b = Usage(input_tokens=5, output_tokens=2, cost_usd=0.25, scope="turn")
    total = a + b
    assert (total.input_tokens, total.cached_input_tokens, total.output_tokens, total.reasoning_tokens) == (
        15,
        4,
        5,
        1,
    )
    assert total.cost_usd == 0.25
    assert total.scope == "turn"
    assert total.total_tokens == 20
    assert (a + a).cost_usd is None
    assert (a + a).scope == "step"


def test_usage_rejects_unknown_scope() -> None:
    with pytest.raises(ValidationError):
        Usage.model_validate({"scope": "month"})


def test_dict_and_text_wire_forms_agree_on_json_values_json_cannot_hold() -> None:
    raw = {"n": float("nan"), "i": float("inf"), "nested": [{"x": float("-inf"), "ok": 1.5}]}
    event = LifecycleEvent(props=RunnerRaw(runner="r", raw_type="t", raw=raw))
    as_text = json.loads(event_json(event))
    assert as_text["props"]["raw"] == {"n": None, "i": None, "nested": [{"x": None, "ok": 1.5}]}
    assert dump_event(event) == as_text
