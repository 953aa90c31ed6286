"""`trusted()` builds exactly the instance validation would, for every event the builder makes,
and `trusted_copy()` the one `model_copy()` would.

The builder skips pydantic validation on its hot path (`orchestrator/stream/trusted.py`); these
tests replay every recorded CLI transcript and a turn that calls each builder method, and check
each event (and every model inside it) against its validated twin: same field values in the same
order, same fields set, same JSON (and `event_json`/`dump_event` against the union adapter's output).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, JsonValue, ValidationError

from orchestrator.stream import (
    CountingIds,
    Event,
    EventAdapter,
    ExecuteProps,
    MessageEnd,
    TextEvent,
    TextProps,
    TurnBuilder,
    Usage,
    dump_event,
    event_json,
    parse_event,
)
from orchestrator.stream.trusted import maker, trusted, trusted_copy
from runners.base import TurnRequest
from runners.registry import adapter_for

GOLDEN = Path(__file__).parents[2] / "golden"
TRANSCRIPTS = sorted(
    p for runner in ("claude", "codex", "opencode") for p in GOLDEN.glob(f"{runner}/*/*.in.jsonl")
)


def assert_as_validated(model: BaseModel) -> None:
    given = {name: getattr(model, name) for name in model.model_fields_set}
    twin = type(model).model_validate(given)
    assert list(model.__dict__) == list(twin.__dict__)
    assert model.__dict__ == twin.__dict__
    assert model.model_fields_set == twin.model_fields_set
    assert model.model_dump_json() == twin.model_dump_json()
    for value in model.__dict__.values():
        if isinstance(value, BaseModel):
            assert_as_validated(value)


def _replay(case: Path) -> list[Event]:
    runner = case.parts[-3]
    lifecycle = "session" if case.name.startswith("serve_") else "oneshot"
    turn = TurnRequest(
        assistant_id="t.a", owner="o", session_id="c", turn_id="t", prompt="", lifecycle=lifecycle
    )
    builder = TurnBuilder(CountingIds(), runner=runner, clock=lambda: 0)
    translator = adapter_for(runner).translator(builder, turn)
    events = builder.stream_start("t.a")
    for line in case.read_text(encoding="utf-8").splitlines():
        events += translator.feed(line)
    events += translator.close(0, "")
    return events + builder.stream_end(translator.outcome.status)


@pytest.mark.parametrize("case", TRANSCRIPTS, ids=lambda p: f"{p.parts[-3]}/{p.name}")
def test_every_event_of_a_recorded_transcript_is_as_validated(case: Path) -> None:
    events = _replay(case)
    assert len(events) > 2
    for event in events:
        assert_as_validated(event)
        assert parse_event(event_json(event)) == event
        assert event_json(event) == EventAdapter.dump_json(event, exclude_none=True).decode()
        assert dump_event(event) == EventAdapter.dump_python(event, mode="json", exclude_none=True)
        copied, reference = trusted_copy(event, seq=9, ts=1), event.model_copy(update={"seq": 9, "ts": 1})
        assert copied.__dict__ == reference.__dict__ and list(copied.__dict__) == list(reference.__dict__)
        assert copied.model_fields_set == reference.model_fields_set


def test_every_builder_method_makes_events_as_validated() -> None:
    b = TurnBuilder(CountingIds(), runner="claude", clock=lambda: 7)
    child = b.child("thread-1")
    events = b.stream_start("a.b", metadata={"k": [1, "x"]})
    events += b.loading("waiting")
    events += b.loading("still waiting")
    events += b.thinking("hm")
    events += b.text("hi ")
    events += b.text("there")
    events += b.tool_call(0, '{"a"', id="call-1", name="f")
    events += b.tool_call(0, ": 1}")
    events += b.tool_started("t1", "Bash", parent_tool_use_id="t0")
    events += b.tool_input_delta("t1", "")
    events += b.tool_input_delta("t1", '{"command": "ls"}')
    events += b.tool_updated("t1", summary="ls")
    events += b.text("between")
    events += b.tool_finished("t1", "out", exit_code=0)
    events += b.tool_started("t2", "Read", {"file_path": "x"}, semantic_type="agent", summary="x")
    events += child.stream_start("c.d")
    events += child.text("nested")
    events += child.stream_end()
    events += b.tool_finished("t3", "never started", is_error=True)
    events += b.usage(Usage(input_tokens=3))
    events += b.raw("odd", {"x": 1})
    events += b.error("bad", "code", {"n": 1})
    events += b.stalled(10)
    events += b.stream_end("error", error="boom")
    assert {e.type for e in events} >= {
        "text",
        "thinking",
        "tool_call",
        "execute",
        "agent",
        "loading",
        "error",
    }
    for event in events:
        assert_as_validated(event)


def test_a_trusted_model_is_a_frozen_model_like_any_other() -> None:
    event = trusted(TextEvent, message_id="m", props=trusted(TextProps, content="x"))
    assert event == TextEvent(message_id="m", props=TextProps(content="x"))
    with pytest.raises(ValidationError):
        event.message_id = "other"  # type: ignore[misc]
    assert event.model_copy(update={"seq": 3}).seq == 3
    assert trusted(MessageEnd, message_id="m", type="text").content is None


def test_a_maker_makes_what_trusted_makes() -> None:
    make = maker(ExecuteProps, "tool_id", "input_delta", status="running")
    made, reference = make("t1", "{"), trusted(ExecuteProps, tool_id="t1", input_delta="{", status="running")
    assert list(made.__dict__.items()) == list(reference.__dict__.items())
    assert made.model_fields_set == reference.model_fields_set == {"tool_id", "input_delta", "status"}
    assert made.model_fields_set is not make("t2", "").model_fields_set  # model_copy updates its own
    assert made.model_copy(update={"output": "x"}).model_fields_set == {
        "tool_id",
        "input_delta",
        "status",
        "output",
    }
    assert_as_validated(made)


@pytest.mark.parametrize(
    ("names", "fixed"),
    [(("input_delta",), {}), (("tool_id", "nope"), {}), (("tool_id",), {"tool_id": "x"})],
    ids=["a required field missing", "an unknown field", "a field twice"],
)
def test_a_maker_refuses_what_would_not_validate(names: tuple[str, ...], fixed: dict[str, str]) -> None:
    with pytest.raises(TypeError):
        maker(ExecuteProps, *names, **fixed)


def test_a_forgotten_required_field_cannot_pass_for_valid() -> None:
    props = trusted(ExecuteProps)  # tool_id is required
    with pytest.raises(ValidationError):
        assert_as_validated(props)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (Usage(input_tokens=1, cost_usd=0.5), Usage(output_tokens=2, scope="turn")),
        (Usage(input_tokens=1), Usage(cached_input_tokens=1, reasoning_tokens=3)),
    ],
)
def test_a_sum_of_usages_is_as_validated(a: Usage, b: Usage) -> None:
    assert_as_validated(a + b)


def test_a_tool_input_is_still_checked_and_copied() -> None:
    b = TurnBuilder(CountingIds())
    given: dict[str, JsonValue] = {"command": "ls", "nested": [1, {"x": None}]}
    events = b.tool_started("t1", "Bash", given)
    given["command"] = "changed later by the caller"
    assert events[-1].props.input == {"command": "ls", "nested": [1, {"x": None}]}  # type: ignore[union-attr]
    with pytest.raises(ValidationError):
        b.tool_updated("t1", input={"not json": object()})  # type: ignore[dict-item]
