"""LLM mode end to end: `run_llm_turn` against the fake model server and real MCP servers
(the `calc` server of `tests/fakes/mcp_servers`, over stdio and streamable HTTP)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.errors import ConfigError
from orchestrator.llm.connections import ModelConnections
from orchestrator.pipeline.modes.llm_turn import LlmTurnInput, LlmTurnResult, run_llm_turn
from orchestrator.stream import (
    CountingIds,
    ErrorEvent,
    Event,
    ExecuteEvent,
    LifecycleEvent,
    StreamEnd,
    StreamStart,
    TextEvent,
    ToolCallEvent,
    TurnBuilder,
    validate_stream,
)
from tests.fakes.mcp_servers import HttpMcpServer
from tests.fakes.mcp_servers.app import MODEL_KEY, SYSTEM_PROMPT, LlmApp
from tests.fakes.model_server import FakeModelServer

FALLBACK_ANSWER = "Sorry, the calculator could not finish; please try again later."


@pytest.fixture
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer("text", host="127.0.0.1") as server:
        server.add_scenario("fallback", [{"text": FALLBACK_ANSWER}])
        yield server


@pytest.fixture
def app(tmp_path: Path, model: FakeModelServer) -> LlmApp:
    made = LlmApp(tmp_path / "app", model.url)
    made.stdio_server()
    return made


class Turn:
    """The events and result of one turn wrapped in the root stream_start/stream_end."""

    def __init__(self, result: LlmTurnResult, events: list[Event]) -> None:
        self.result = result
        self.events = events

    def of(self, kind: type[Any], thread: str | None = None) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind) and e.thread_id == thread]

    def lifecycle(self, props: type[Any]) -> list[LifecycleEvent]:
        return [e for e in self.events if isinstance(e, LifecycleEvent) and isinstance(e.props, props)]

    def text(self, thread: str | None = None) -> str:
        return "".join(e.props.content for e in self.of(TextEvent, thread))


async def run_turn(
    app: LlmApp,
    assistant_id: str,
    messages: Sequence[Any] = ({"role": "user", "content": "What is 2 + 3?"},),
    *,
    environ: dict[str, str] | None = None,
    cancel: anyio.Event | None = None,
    connections: ModelConnections | None = None,
    **overrides: Any,
) -> Turn:
    loader = app.loader(environ)
    assistant = await anyio.to_thread.run_sync(loader.get, assistant_id)
    events: list[Event] = []

    async def emit(batch: Sequence[Event]) -> None:
        events.extend(batch)

    builder = TurnBuilder(CountingIds())
    events.extend(builder.stream_start(assistant_id))
    overrides.setdefault("allow_host_mcp", True)  # these tests drive the calc server on this host
    inp = LlmTurnInput(assistant=assistant, messages=messages, session_id="s-1", turn_id="t-1", **overrides)
    result = await run_llm_turn(
        inp, loader=loader, builder=builder, emit=emit, cancel=cancel, connections=connections
    )
    events.extend(builder.stream_end(result.status, error=result.error, usage=result.usage))
    problems = validate_stream(events, stamped=False)
    assert problems == [], problems
    dumped = json.dumps([e.model_dump(mode="json") for e in events]) + result.model_dump_json()
    assert MODEL_KEY not in dumped
    return Turn(result, events)


def requests_for(model: FakeModelServer, scenario: str) -> list[Any]:
    return [r for r in model.requests.all() if r.scenario == scenario]


def tool_results_in(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Anthropic `tool_result` blocks of a request body."""
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def result_text(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


def assert_servers_stopped(app: LlmApp) -> None:
    pids = app.server_pids()
    assert pids, "the stdio server never started"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# -- a tool listed, called, and its result fed back ---------------------------------------------


async def test_mcp_tool_is_listed_called_and_its_result_fed_back(app: LlmApp, model: FakeModelServer) -> None:
    model.add_scenario("main", [{"tool": "calc__add", "args": {"a": 2, "b": 3}}, {"text": "2 + 3 = 5."}])
    turn = await run_turn(app, app.assistant())

    assert turn.result.stop_reason == "completed" and turn.result.status == "completed"
    assert turn.result.content == "2 + 3 = 5."
    assert not turn.result.fallback_used
    assert [(t.name, t.output, t.is_error) for t in turn.result.tool_results] == [("calc__add", "5", False)]
    assert app.calls("add") == [{"a": 2, "b": 3}]

    first, second = requests_for(model, "main")
    offered = {t["name"]: t for t in first.body["tools"]}
    assert {"calc__add", "calc__flaky", "calc__fail", "calc__slow"} <= set(offered)
    assert offered["calc__add"]["input_schema"]["required"] == ["a", "b"]
    assert SYSTEM_PROMPT in json.dumps(first.body["system"])
    assert [result_text(b) for b in tool_results_in(second.body)] == ["5"]

    calls = turn.of(ToolCallEvent)
    assert calls and calls[0].props.name == "calc__add"
    finished = [e for e in turn.of(ExecuteEvent) if e.props.status == "completed"]
    assert [(e.props.tool, e.props.output, e.props.runner) for e in finished] == [("calc__add", "5", "mcp")]
    assert turn.text() == "2 + 3 = 5."
    assert_servers_stopped(app)


async def test_conversation_dicts_with_history_and_a_system_message(
    app: LlmApp, model: FakeModelServer
) -> None:
    model.add_scenario("main", [{"text": "Hi again."}])
    messages = [
        {"role": "system", "content": "Answer in one line."},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hello! What shall I add?"},
        {"role": "user", "content": [{"type": "text", "text": "nothing"}, {"type": "image_url"}]},
    ]
    turn = await run_turn(app, app.assistant(), messages)

    assert turn.result.content == "Hi again."
    (request,) = requests_for(model, "main")
    system = json.dumps(request.body["system"])
    assert SYSTEM_PROMPT in system and "Answer in one line." in system
    sent = [(m["role"], json.dumps(m["content"])) for m in request.body["messages"]]
    assert [role for role, _ in sent] == ["user", "assistant", "user"]
    assert "nothing" in sent[-1][1] and "[image_url]" in sent[-1][1]


# -- retries -----------------------------------------------------------------------------------


async def test_a_tool_failing_twice_then_succeeding_completes_the_turn(
    app: LlmApp, model: FakeModelServer
) -> None:
    # The model varies `attempt`: the loop engine stops an identical call repeated in consecutive rounds.
    steps: list[dict[str, Any]] = [
        {"tool": "calc__flaky", "args": {"key": "k1", "attempt": n}} for n in (1, 2, 3)
    ]
    model.add_scenario("main", [*steps, {"text": "Third time lucky."}])
    turn = await run_turn(app, app.assistant())

    assert turn.result.stop_reason == "completed"
    assert turn.result.content == "Third time lucky."
    assert not turn.result.fallback_used
    flaky = turn.result.tool_results
    assert [t.is_error for t in flaky] == [True, True, False]
    assert [t.attempt for t in flaky] == [1, 2, None]
    assert flaky[0].failure == "tool_error" and flaky[0].retryable is True
    assert flaky[2].output == "flaky ok after 2 failures"
    assert len(app.calls("flaky")) == 3

    requests = requests_for(model, "main")
    assert len(requests) == 4
    fed_back = result_text(tool_results_in(requests[1].body)[0])
    assert "flaky failure 1 of 2" in fed_back and "Attempt 1 of 3 failed" in fed_back
    assert tool_results_in(requests[1].body)[0].get("is_error") is True


async def test_a_tool_failing_every_time_stops_after_three_attempts_and_hands_off(
    app: LlmApp, model: FakeModelServer
) -> None:
    steps: list[dict[str, Any]] = [{"tool": "calc__fail", "args": {"attempt": n}} for n in range(1, 6)]
    model.add_scenario("main", [*steps, {"text": "unreachable"}])
    turn = await run_turn(app, app.assistant())

    result = turn.result
    assert result.stop_reason == "error"
    assert result.fallback_used and result.fallback_assistant == "__yao.loop_fallback"
    assert result.status == "completed" and result.error is None
    assert result.content == FALLBACK_ANSWER
    assert result.handoff_reason is not None and "'calc__fail' failed 3 times" in result.handoff_reason
    assert len(app.calls("fail")) == 3  # the server saw exactly three attempts
    assert len(requests_for(model, "main")) == 3  # no model call after the third failure
    assert [t.attempt for t in result.tool_results] == [1, 2, 3]

    (stop,) = [e for e in turn.of(ErrorEvent) if e.props.code == "tool_retries_exhausted"]
    assert stop.props.details == {"tool": "calc__fail"}
    (fallback_request,) = requests_for(model, "fallback")
    assert not fallback_request.body.get("tools")
    system, digest = fallback_request.body["messages"]
    assert system["role"] == "system" and "You step in after another assistant" in system["content"]
    assert "Hand-off from assistant" in digest["content"] and "the backend is down" in digest["content"]
    assert SYSTEM_PROMPT in digest["content"]
    assert_servers_stopped(app)


async def test_a_timeout_is_a_retryable_failure(app: LlmApp, model: FakeModelServer) -> None:
    app.stdio_server(timeout="1s")
    model.add_scenario(
        "main", [{"tool": "calc__slow", "args": {"seconds": 20}}, {"text": "It was too slow."}]
    )
    started = time.monotonic()
    turn = await run_turn(app, app.assistant())

    assert time.monotonic() - started < 15
    assert turn.result.stop_reason == "completed" and turn.result.content == "It was too slow."
    (slow,) = turn.result.tool_results
    assert slow.is_error and slow.failure == "timeout" and slow.retryable is True
    assert "timed out after 1s" in slow.output


async def test_an_unknown_tool_is_not_retried(app: LlmApp, model: FakeModelServer) -> None:
    model.add_scenario("main", [{"tool": "calc__divide", "args": {"a": 1}, "force": True}, {"text": "no"}])
    turn = await run_turn(app, app.assistant())

    assert turn.result.stop_reason == "error" and turn.result.fallback_used
    (call,) = turn.result.tool_results
    assert call.failure == "unknown_tool" and call.retryable is False
    assert "calc__add" in call.output  # the model is told what exists
    assert len(requests_for(model, "main")) == 1
    assert turn.result.handoff_reason is not None and "not retryable" in turn.result.handoff_reason


async def test_a_schema_violation_is_not_retried_and_never_reaches_the_server(
    app: LlmApp, model: FakeModelServer
) -> None:
    model.add_scenario("main", [{"tool": "calc__add", "args": {"a": "two"}}, {"text": "no"}])
    turn = await run_turn(app, app.assistant())

    (call,) = turn.result.tool_results
    assert call.failure == "schema" and call.retryable is False
    assert call.output.startswith("invalid arguments for calc__add: ")
    assert app.calls("add") == []
    assert turn.result.stop_reason == "error" and turn.result.fallback_used


# -- max_turn and the fallback ------------------------------------------------------------------


async def test_max_turn_exhaustion_hands_off_to_the_fallback_in_a_nested_thread(
    app: LlmApp, model: FakeModelServer
) -> None:
    steps = [{"tool": "calc__add", "args": {"a": n, "b": n}} for n in range(1, 6)]
    model.add_scenario("main", [*steps, {"text": "unreachable"}])
    turn = await run_turn(app, app.assistant(options={"max_turn": 2}))

    result = turn.result
    assert result.stop_reason == "max_rounds" and result.rounds == 2
    assert result.fallback_used and result.content == FALLBACK_ANSWER
    assert result.handoff_reason == "the tool loop used all 2 rounds without a final answer"
    assert len(requests_for(model, "main")) == 2

    (start,) = turn.lifecycle(StreamStart)[1:]
    thread = start.thread_id
    assert thread is not None and thread.startswith("fallback-")
    assert isinstance(start.props, StreamStart) and start.props.assistant_id == "__yao.loop_fallback"
    assert turn.text(thread) == FALLBACK_ANSWER
    ends = [e for e in turn.lifecycle(StreamEnd) if e.thread_id == thread]
    assert len(ends) == 1 and isinstance(ends[0].props, StreamEnd) and ends[0].props.status == "completed"
    assert any(e.props.code == "max_rounds" for e in turn.of(ErrorEvent))
    fallback_usage = requests_for(model, "fallback")[0].usage
    assert fallback_usage is not None
    digest = json.dumps(requests_for(model, "fallback")[0].body["messages"])
    assert "calc__add" in digest and "used all 2 rounds" in digest


async def test_the_fallback_reaches_the_model_over_the_turns_connections(
    app: LlmApp, model: FakeModelServer
) -> None:
    """The hand-off's model call goes over the shared pools, as the turn's own calls do: two turns
    that both hand off reach the main model (Anthropic) over one connection, and the fallback's
    (OpenAI) over another one."""
    steps = [{"tool": "calc__add", "args": {"a": n, "b": n}} for n in range(1, 4)]
    model.add_scenario("main", [*steps, {"text": "unreachable"}, *steps, {"text": "unreachable"}])
    connections = ModelConnections()
    try:
        for _ in range(2):
            turn = await run_turn(app, app.assistant(options={"max_turn": 2}), connections=connections)
            assert turn.result.fallback_used and turn.result.content == FALLBACK_ANSWER
    finally:
        await connections.aclose()
    main = {r.peer for r in requests_for(model, "main")}
    fallback = [r.peer for r in requests_for(model, "fallback")]
    assert len(main) == 1 and None not in main, main
    assert len(fallback) == 2 and len(set(fallback)) == 1 and fallback[0], fallback


async def test_a_failing_fallback_ends_the_turn_in_error(app: LlmApp, model: FakeModelServer) -> None:
    model.add_scenario("fallback", [{"text": "unreachable", "fail_status": 400}])
    steps = [{"tool": "calc__add", "args": {"a": n, "b": 1}} for n in range(1, 4)]
    model.add_scenario("main", [*steps, {"text": "unreachable"}])
    turn = await run_turn(app, app.assistant(options={"max_turn": 1}))

    assert turn.result.status == "error" and turn.result.fallback_used
    assert (
        turn.result.error is not None
        and "fallback assistant '__yao.loop_fallback' failed too" in turn.result.error
    )
    (thread_end,) = [e for e in turn.lifecycle(StreamEnd) if e.thread_id is not None]
    assert isinstance(thread_end.props, StreamEnd) and thread_end.props.status == "error"
    assert any(e.props.code == "fallback_failed" for e in turn.of(ErrorEvent))


async def test_tool_loop_off_runs_one_round_without_a_hand_off(app: LlmApp, model: FakeModelServer) -> None:
    model.add_scenario(
        "main",
        [
            {"parts": [{"text": "Adding."}, {"tool": "calc__add", "args": {"a": 1, "b": 1}}]},
            {"text": "unreachable"},
        ],
    )
    turn = await run_turn(app, app.assistant(options={"tool_loop": False}))

    assert turn.result.stop_reason == "completed" and not turn.result.fallback_used
    assert turn.result.content == "Adding."
    assert [t.output for t in turn.result.tool_results] == ["2"]
    assert len(requests_for(model, "main")) == 1
    assert not turn.of(ErrorEvent)


# -- configuration ------------------------------------------------------------------------------


async def test_the_allowlist_limits_the_offered_tools(app: LlmApp, model: FakeModelServer) -> None:
    model.add_scenario("main", [{"text": "ok"}])
    await run_turn(app, app.assistant(servers=[{"calc": ["add", "greet"]}]))
    (request,) = requests_for(model, "main")
    assert sorted(t["name"] for t in request.body["tools"]) == ["calc__add", "calc__greet"]


async def test_a_preset_and_request_overrides(app: LlmApp, model: FakeModelServer) -> None:
    aid = app.assistant()
    app.write("assistants/tests/calc/prompts/terse.yml", "- role: system\n  content: Be terse.\n")
    turn = await run_turn(
        app, aid, prompt_preset="terse", temperature=0.3, max_tokens=99, connector="fallback"
    )
    assert turn.result.content == FALLBACK_ANSWER
    (request,) = requests_for(model, "fallback")  # the connector override: OpenAI, model fake@fallback
    system = request.body["messages"][0]
    assert system["role"] == "system" and system["content"] == "Be terse."
    assert request.body["temperature"] == 0.3 and request.body["max_tokens"] == 99
    assert {t["function"]["name"] for t in request.body["tools"]} >= {"calc__add"}

    turn = await run_turn(app, aid, prompt_preset="chatty")
    assert turn.result.status == "error" and turn.result.error is not None and "chatty" in turn.result.error


async def test_an_unreachable_mcp_server_fails_the_turn_without_calling_the_model(
    app: LlmApp, model: FakeModelServer
) -> None:
    app.stdio_server("broken", command="/nonexistent/mcp-server", arguments=[])
    turn = await run_turn(app, app.assistant(servers=["calc", "broken"]))

    assert turn.result.status == "error" and not turn.result.fallback_used
    assert turn.result.error is not None and "mcp:broken" in turn.result.error
    assert [e.props.code for e in turn.of(ErrorEvent)] == ["llm_setup_failed"]
    assert requests_for(model, "main") == []
    assert_servers_stopped(app)  # the server that did start was closed again


async def test_stdio_servers_are_refused_unless_the_operator_allows_host_mcp(
    app: LlmApp, model: FakeModelServer
) -> None:
    aid = app.assistant()
    with pytest.raises(ConfigError) as caught:
        await run_turn(app, aid, allow_host_mcp=False)
    error = caught.value
    assert error.file.name == "package.yao" and error.key_path == "mcp.servers.calc"
    assert "stdio" in error.reason and "CAGE_ALLOW_HOST_MCP" in error.reason
    assert requests_for(model, "main") == []  # refused before the model or the server was started
    assert not (app.state / "pids").exists() or (app.state / "pids").read_text().strip() == ""


async def test_extra_servers_from_the_request(app: LlmApp, model: FakeModelServer) -> None:
    app.stdio_server("more")
    model.add_scenario("main", [{"tool": "more__add", "args": {"a": 4, "b": 4}}, {"text": "8"}])
    from orchestrator.dsl import McpServerRef

    turn = await run_turn(app, app.assistant(), mcp_servers=(McpServerRef(server_id="more", tools=("add",)),))
    assert [t.output for t in turn.result.tool_results] == ["8"]
    (first, _) = requests_for(model, "main")
    names = {t["name"] for t in first.body["tools"]}
    assert "more__add" in names and "more__greet" not in names and "calc__greet" in names


# -- streamable HTTP ----------------------------------------------------------------------------


async def test_a_streamable_http_server_with_a_bearer_token(app: LlmApp, model: FakeModelServer) -> None:
    token = "mcp-http-token-7f3a9c"
    with HttpMcpServer(app.state, token=token) as http:
        app.http_server("web", http.url, token="$ENV.WEB_MCP_TOKEN")
        model.add_scenario("main", [{"tool": "web__add", "args": {"a": 20, "b": 22}}, {"text": "42"}])
        turn = await run_turn(app, app.assistant(servers=["web"]), environ={"WEB_MCP_TOKEN": token})

    assert turn.result.stop_reason == "completed" and turn.result.content == "42"
    assert [t.output for t in turn.result.tool_results] == ["42"]
    assert app.calls("add") == [{"a": 20, "b": 22}]
    dumped = json.dumps([e.model_dump(mode="json") for e in turn.events]) + turn.result.model_dump_json()
    assert token not in dumped


async def test_a_wrong_http_token_is_a_setup_error_that_names_no_secret(
    app: LlmApp, model: FakeModelServer
) -> None:
    with HttpMcpServer(app.state, token="right-token-123456") as http:
        app.http_server("web", http.url, token="wrong-token-654321")
        turn = await run_turn(app, app.assistant(servers=["web"]))
    assert turn.result.status == "error" and turn.result.error is not None
    assert "mcp:web" in turn.result.error and "wrong-token-654321" not in turn.result.error


# -- cancellation -------------------------------------------------------------------------------


async def test_cancel_during_a_tool_call_closes_the_servers(app: LlmApp, model: FakeModelServer) -> None:
    model.add_scenario("main", [{"tool": "calc__slow", "args": {"seconds": 30}}, {"text": "unreachable"}])
    cancel = anyio.Event()

    async def cancel_soon() -> None:
        with anyio.fail_after(20):
            while not app.calls("slow"):  # noqa: ASYNC110 - polls a file the server process writes
                await anyio.sleep(0.05)
        cancel.set()

    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_soon)
        turn = await run_turn(app, app.assistant(), cancel=cancel)
    assert time.monotonic() - started < 20
    assert turn.result.status == "cancelled" and not turn.result.fallback_used
    assert_servers_stopped(app)
