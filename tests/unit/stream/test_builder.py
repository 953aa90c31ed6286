"""TurnBuilder: the sequences it builds are valid, and it keeps the windowing rules."""

from __future__ import annotations

import re
import threading

import pytest

from orchestrator.errors import ProtocolError
from orchestrator.redaction import register_secret
from orchestrator.stream import (
    CountingIds,
    ErrorEvent,
    Event,
    ExecuteEvent,
    ExecuteProps,
    LifecycleEvent,
    LoadingEvent,
    MessageEnd,
    MessageStart,
    RandomIds,
    StreamEnd,
    TextEvent,
    ToolCallEvent,
    ToolCallProps,
    TurnBuilder,
    Usage,
    validate_stream,
)
from tests.golden.stream.scenario import build_turn, ticking


def _builder() -> TurnBuilder:
    return TurnBuilder(CountingIds(), runner="claude", clock=ticking(0, 1))


def _windows(events: list[Event]) -> list[tuple[str, str, str]]:
    """(start|end, message_id, type) of every message window event, in order."""
    out: list[tuple[str, str, str]] = []
    for e in events:
        if isinstance(e, LifecycleEvent) and isinstance(e.props, MessageStart | MessageEnd):
            out.append((e.props.event.removeprefix("message_"), e.props.message_id, e.props.type))
    return out


def _ends(events: list[Event]) -> dict[str, MessageEnd]:
    return {
        e.props.message_id: e.props
        for e in events
        if isinstance(e, LifecycleEvent) and isinstance(e.props, MessageEnd)
    }


def test_golden_scenario_is_a_valid_stream() -> None:
    assert validate_stream(build_turn()) == []


def test_text_then_tool_closes_the_text_and_tool_phases_share_one_id() -> None:
    b = _builder()
    events = b.stream_start("a.b") + b.text("Hello ") + b.text("world")
    events += b.tool_started("t1", "Bash", {"command": "ls"})
    events += b.text("interlude")
    events += b.tool_finished("t1", "file.txt\n", exit_code=0)
    events += b.stream_end()
    assert validate_stream(events, stamped=False) == []
    assert _windows(events) == [
        ("start", "text-1", "text"),
        ("end", "text-1", "text"),
        ("start", "execute-1", "execute"),
        ("end", "execute-1", "execute"),
        ("start", "text-2", "text"),
        ("end", "text-2", "text"),
        ("start", "execute-1", "execute"),
        ("end", "execute-1", "execute"),
    ]
    ends = [e.props for e in events if isinstance(e, LifecycleEvent) and isinstance(e.props, MessageEnd)]
    assert ends[0].content == "Hello world" and ends[0].chunk_count == 2
    final = ends[3].content
    assert isinstance(final, ExecuteProps)
    assert (final.status, final.output, final.exit_code, final.input) == (
        "completed",
        "file.txt\n",
        0,
        {"command": "ls"},
    )
    running = ends[1].content
    assert isinstance(running, ExecuteProps) and running.status == "running"


def test_streamed_tool_input_is_parsed_into_input_at_the_end() -> None:
    b = _builder()
    events = b.stream_start("a.b") + b.tool_started("t1", "Write", semantic_type="agent")
    events += b.tool_input_delta("t1", '{"path": ') + b.tool_input_delta("t1", '"a.txt"}')
    events += b.tool_finished("t1", "written", is_error=False)
    events += b.stream_end()
    assert validate_stream(events, stamped=False) == []
    assert all(e.type == "agent" for e in events if isinstance(e, ExecuteEvent))
    final = _ends(events)["agent-1"].content
    assert isinstance(final, ExecuteProps)
    assert final.input == {"path": "a.txt"} and final.input_delta is None


def test_parallel_tools_switch_windows_and_each_finishes_in_its_own_id() -> None:
    b = _builder()
    events = b.stream_start("a.b") + b.tool_started("t1", "Read") + b.tool_started("t2", "Grep")
    events += b.tool_input_delta("t1", "{}")
    events += b.tool_finished("t2", "match", is_error=True, exit_code=1)
    events += b.tool_finished("t1", "content")
    events += b.stream_end()
    assert validate_stream(events, stamped=False) == []
    ends = _ends(events)
    t2 = ends["execute-2"].content
    assert isinstance(t2, ExecuteProps) and (t2.status, t2.is_error) == ("error", True)
    assert b.running_tools == ()


def test_loading_is_replaced_then_closed_when_content_arrives() -> None:
    b = _builder()
    events = b.stream_start("a.b") + b.loading("Preparing...") + b.loading("Starting...") + b.thinking("hm")
    loading = [e for e in events if isinstance(e, LoadingEvent)]
    assert [(e.props.message, e.props.done, e.delta_action) for e in loading] == [
        ("Preparing...", False, "replace"),
        ("Starting...", False, "replace"),
        ("", True, "replace"),
    ]
    assert _windows(events)[:3] == [
        ("start", "loading-1", "loading"),
        ("end", "loading-1", "loading"),
        ("start", "thinking-1", "thinking"),
    ]
    assert validate_stream(events + b.stream_end(), stamped=False) == []


def test_stream_end_fails_unfinished_tools_and_closes_windows_as_cancelled() -> None:
    b = _builder()
    events = b.stream_start("a.b") + b.text("working") + b.tool_started("t1", "Bash", {"command": "sleep 99"})
    events += b.stream_end("cancelled")
    assert validate_stream(events, stamped=False) == []
    end = events[-1]
    assert isinstance(end, LifecycleEvent) and isinstance(end.props, StreamEnd)
    assert end.props.status == "cancelled"
    final = [e for e in events if isinstance(e, ExecuteEvent)][-1].props
    assert (final.status, final.is_error) == ("error", True)
    assert final.output == "tool did not finish: turn cancelled"
    assert _ends(events)["execute-1"].status == "cancelled"
    assert b.running_tools == ()


def test_builder_refuses_events_after_stream_end() -> None:
    b = _builder()
    b.stream_start("a.b")
    b.stream_end()
    with pytest.raises(ProtocolError, match="after stream_end"):
        b.text("late")


def test_stream_start_twice_is_an_error() -> None:
    b = _builder()
    b.stream_start("a.b")
    with pytest.raises(ProtocolError):
        b.stream_start("a.b")


def test_delta_for_unknown_tool_is_an_error_but_a_result_for_one_gets_its_own_window() -> None:
    b = _builder()
    events = b.stream_start("a.b")
    with pytest.raises(ProtocolError, match="not running"):
        b.tool_input_delta("ghost", "{}")
    events += b.tool_finished("resumed", "ok")
    events += b.stream_end()
    assert validate_stream(events, stamped=False) == []
    assert _windows(events) == [("start", "execute-1", "execute"), ("end", "execute-1", "execute")]


def test_repeated_start_of_a_streamed_tool_updates_it() -> None:
    b = _builder()
    events = b.stream_start("a.b") + b.tool_started("t1", "Bash") + b.text("x")
    events += b.tool_started("t1", "Bash", {"command": "pwd"}, summary="pwd")
    events += b.tool_finished("t1", "/w")
    events += b.stream_end()
    assert validate_stream(events, stamped=False) == []
    assert [w for w in _windows(events) if w[0] == "start" and w[2] == "execute"] == [
        ("start", "execute-1", "execute")
    ] * 3
    final = _ends(events)["execute-1"].content
    assert isinstance(final, ExecuteProps) and final.summary == "pwd" and final.input == {"command": "pwd"}


def test_llm_tool_calls_stream_arguments_per_index() -> None:
    b = _builder()
    events = b.stream_start("a.b") + b.tool_call(0, '{"q":', id="call_a", name="search")
    events += b.tool_call(1, "{}", id="call_b", name="clock")
    events += b.tool_call(0, ' "cats"}')
    events += b.stream_end()
    assert validate_stream(events, stamped=False) == []
    fragments = [e for e in events if isinstance(e, ToolCallEvent)]
    assert [(f.delta_action, f.props.arguments) for f in fragments] == [
        ("merge", '{"q":'),
        ("merge", "{}"),
        ("append", ' "cats"}'),
    ]
    contents = [end.content for end in _ends(events).values()]
    assert ToolCallProps(index=0, id="call_a", name="search", arguments='{"q": "cats"}') in contents
    with pytest.raises(ProtocolError):
        _builder().tool_call(3, "{}")


def test_turn_usage_sums_steps_unless_a_turn_total_is_reported() -> None:
    b = _builder()
    b.stream_start("a.b")
    b.usage(Usage(input_tokens=10, output_tokens=1))
    b.usage(Usage(input_tokens=20, output_tokens=2, cost_usd=0.1))
    summed = b.turn_usage
    assert summed is not None and (summed.input_tokens, summed.output_tokens, summed.scope) == (30, 3, "turn")
    b.usage(Usage(input_tokens=99, scope="cumulative"))
    assert b.turn_usage == summed
    b.result(usage=Usage(input_tokens=31, output_tokens=3, scope="turn"))
    end = b.stream_end()[-1]
    assert isinstance(end, LifecycleEvent) and isinstance(end.props, StreamEnd)
    assert end.props.usage == Usage(input_tokens=31, output_tokens=3, scope="turn")


def test_errors_are_redacted() -> None:
    register_secret("sk-live-abcdef123456")
    b = _builder()
    b.stream_start("a.b")
    err = b.error("auth failed with key sk-live-abcdef123456", "runner_failed")[0]
    assert isinstance(err, ErrorEvent)
    assert "abcdef123456" not in err.props.message and err.props.code == "runner_failed"
    out = b.tool_finished("t", "API_KEY=sk-live-abcdef123456")
    assert not any("abcdef123456" in e.model_dump_json() for e in out)
    end = b.stream_end("error", error="token sk-live-abcdef123456 rejected")[-1]
    assert "abcdef123456" not in end.model_dump_json()


def test_nested_call_builder_brackets_a_thread() -> None:
    b = _builder()
    events = b.stream_start("a.b") + b.text("delegating")
    child = b.child("thread-1")
    events += child.stream_start("a.helper") + child.text("sub answer") + child.stream_end()
    events += b.text(" done") + b.stream_end()
    assert validate_stream(events, stamped=False) == []
    assert {e.thread_id for e in events if isinstance(e, TextEvent)} == {None, "thread-1"}


def test_random_ids_are_unique_and_prefixed() -> None:
    ids = RandomIds()
    made = {ids.next_id("text") for _ in range(200)}
    assert len(made) == 200 and all(i.startswith("text-") for i in made)


def test_random_ids_drawn_in_batches_stay_unique_across_draws_and_threads() -> None:
    ids = RandomIds()
    made: list[str] = []

    def take() -> None:
        made.extend(ids.next_id("c") for _ in range(2000))  # several draws of 256 each

    workers = [threading.Thread(target=take) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(set(made)) == len(made) == 8000
    assert all(re.fullmatch(r"c-[0-9a-f]{12}", i) for i in made)
