"""Claude Code and tai ask through Cage: the real CLI in its real image, the fake model server's
scripted tool calls, the pipeline's broker, answers delivered the way the API delivers them.

Per runner: a denied `bash` call never runs (checked in the container) and the model receives
the refusal; an approved one runs; no answer applies the policy's default; "allow always" stops
asking on the next turn; a question round-trips into the agent's tool result.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import docker
import pytest

from orchestrator.stream import Event, validate_stream
from tests.fakes.assistants import write_assistant, write_connector
from tests.fakes.model_server import FakeModelServer
from tests.integration.pipeline.test_pipeline_docker import boxes
from tests.pipeline_rig import Rig

RUNNERS = ("claude", "tai")
WORKSPACE = "/workspace"
MAKE = "echo made > made.txt"
REFUSAL = "no files today"
QUESTION: dict[str, Any] = {
    "claude": {
        "tool": "AskUserQuestion",
        "args": {
            "questions": [
                {
                    "question": "Which colour?",
                    "header": "Colour",
                    "options": [
                        {"label": "red", "description": "warm"},
                        {"label": "blue", "description": "cool"},
                    ],
                    "multiSelect": False,
                }
            ]
        },
    },
    "tai": {"tool": "question", "args": {"question": "Which colour?", "options": ["red", "blue"]}},
}

Answer = Callable[[Rig, str, Any], Awaitable[None]]


def assistant(rig: Rig, server: FakeModelServer, runner: str, scenario: str, *, timeout: str = "5m") -> str:
    """An assistant of `runner` whose policy asks for every call (timeout: the default denies)."""
    name = f"perm-{runner}-{scenario}-{uuid.uuid4().hex[:6]}"
    write_connector(
        rig.root,
        name,
        kind="anthropic",
        model=f"claude-sonnet-4-5@{scenario}",
        host=server.url,
        key_env="FAKE_KEY",
    )
    assistant_id = f"perm.{name.replace('-', '_')}"
    write_assistant(
        rig.root,
        assistant_id,
        package={"name": assistant_id, "connector": name},
        prompts="- role: system\n  content: You are a careful coding agent.\n",
        sandbox={
            "version": "2.0",
            "runner": {"name": runner},
            "lifecycle": "session",
            "computer": {"memory": "1GB"},
            "permissions": {"mode": "ask", "timeout": timeout, "default": "deny"},
        },
    )
    return assistant_id


@pytest.fixture(scope="module", autouse=True)
def scenarios(model_server: FakeModelServer) -> None:
    model_server.add_scenario("perm-make", [{"shell": MAKE}, {"text": "done"}])
    for runner, step in QUESTION.items():
        model_server.add_scenario(f"perm-ask-{runner}", [step, {"text": "ok"}])


async def run(
    rig: Rig, assistant_id: str, session_id: str, on_request: Answer | None, on_question: Answer | None = None
) -> list[Event]:
    """One turn; each `permission/request` and `question` is answered as it streams."""
    turn = rig.turn(assistant_id, "go", session_id=session_id)
    events: list[Event] = []
    with anyio.fail_after(300):
        handle = await rig.service.start(turn)
        async for event in handle.events():
            events.append(event)
            name = getattr(event.props, "event", None)
            if name == "permission/request" and on_request is not None:
                await on_request(rig, session_id, event.props)
            elif name == "question" and on_question is not None:
                await on_question(rig, session_id, event.props)
        await handle.result()
    assert validate_stream(events) == []
    return events


def props(events: list[Event], name: str) -> list[Any]:
    return [e.props for e in events if getattr(e.props, "event", None) == name]


def decide(decision: str, message: str | None = None) -> Answer:
    async def answer(rig: Rig, session_id: str, request: Any) -> None:
        await rig.service.respond_permission(session_id, request.request_id, decision, message)  # type: ignore[arg-type]

    return answer


def in_box(client: docker.DockerClient, rig: Rig, assistant_id: str, path: str) -> bool:
    [box] = boxes(client, rig, assistant_id)
    code, _ = box.exec_run(["test", "-e", f"{WORKSPACE}/{path}"])
    return code == 0


def tool_results(server: FakeModelServer, scenario: str) -> list[str]:
    return [text for record in server.requests.for_scenario(scenario) for text in record.tool_results()]


@pytest.mark.parametrize("runner", RUNNERS)
async def test_a_denied_bash_call_never_runs_and_the_agent_gets_the_refusal(
    e2e: Rig, model_server: FakeModelServer, docker_engine: docker.DockerClient, runner: str
) -> None:
    assistant_id = assistant(e2e, model_server, runner, "perm-make")
    events = await run(e2e, assistant_id, f"chat-{uuid.uuid4().hex[:8]}", decide("deny", REFUSAL))
    [request] = props(events, "permission/request")
    assert request.tool == "bash" and MAKE in str(request.input)
    [resolved] = props(events, "permission/resolved")
    assert (resolved.decision, resolved.by) == ("deny", "user")
    assert not in_box(docker_engine, e2e, assistant_id, "made.txt")
    assert any(REFUSAL in text for text in tool_results(model_server, "perm-make")), tool_results(
        model_server, "perm-make"
    )


@pytest.mark.parametrize("runner", RUNNERS)
async def test_an_approved_call_runs_and_allow_always_stops_asking(
    e2e: Rig, model_server: FakeModelServer, docker_engine: docker.DockerClient, runner: str
) -> None:
    assistant_id = assistant(e2e, model_server, runner, "perm-make")
    session = f"chat-{uuid.uuid4().hex[:8]}"
    first = await run(e2e, assistant_id, session, decide("allow_always"))
    assert len(props(first, "permission/request")) == 1
    assert props(first, "permission/resolved")[0].always
    assert in_box(docker_engine, e2e, assistant_id, "made.txt")
    [box] = boxes(docker_engine, e2e, assistant_id)
    box.exec_run(["rm", f"{WORKSPACE}/made.txt"], user="root")

    async def must_not_ask(rig: Rig, session_id: str, request: Any) -> None:
        raise AssertionError(f"asked again: {request}")

    second = await run(e2e, assistant_id, session, must_not_ask)  # the same call, next turn
    assert props(second, "permission/request") == []
    assert in_box(docker_engine, e2e, assistant_id, "made.txt")


@pytest.mark.parametrize("runner", RUNNERS)
async def test_no_answer_applies_the_default(
    e2e: Rig, model_server: FakeModelServer, docker_engine: docker.DockerClient, runner: str
) -> None:
    assistant_id = assistant(e2e, model_server, runner, "perm-make", timeout="2s")
    events = await run(e2e, assistant_id, f"chat-{uuid.uuid4().hex[:8]}", None)
    [resolved] = props(events, "permission/resolved")
    assert (resolved.decision, resolved.by) == ("deny", "timeout")
    assert not in_box(docker_engine, e2e, assistant_id, "made.txt")


@pytest.mark.parametrize("runner", RUNNERS)
async def test_a_question_round_trips_into_the_tool_result(
    e2e: Rig, model_server: FakeModelServer, runner: str
) -> None:
    scenario = f"perm-ask-{runner}"
    assistant_id = assistant(e2e, model_server, runner, scenario)

    async def answer(rig: Rig, session_id: str, question: Any) -> None:
        assert question.text == "Which colour?" and tuple(question.options) == ("red", "blue")
        await rig.service.respond_question(session_id, question.request_id, "blue, definitely")

    events = await run(e2e, assistant_id, f"chat-{uuid.uuid4().hex[:8]}", None, answer)
    assert len(props(events, "question")) == 1
    assert any("blue, definitely" in text for text in tool_results(model_server, scenario)), tool_results(
        model_server, scenario
    )


@pytest.mark.parametrize("runner", RUNNERS)
async def test_an_interrupt_while_a_call_waits_refuses_it_and_ends_the_turn_cancelled(
    e2e: Rig, model_server: FakeModelServer, docker_engine: docker.DockerClient, runner: str
) -> None:
    assistant_id = assistant(e2e, model_server, runner, "perm-make")
    turn = e2e.turn(assistant_id, "go", session_id=f"chat-{uuid.uuid4().hex[:8]}")
    events: list[Event] = []
    with anyio.fail_after(300):
        handle = await e2e.service.start(turn)
        async for event in handle.events():
            events.append(event)
            if getattr(event.props, "event", None) == "permission/request":
                await handle.interrupt()  # nobody answers: the user stops the turn instead
        await handle.result()
    assert validate_stream(events) == []
    [resolved] = props(events, "permission/resolved")
    assert resolved.decision == "deny"
    [end] = [p for p in props(events, "stream_end")]
    assert end.status == "cancelled"
    assert not in_box(docker_engine, e2e, assistant_id, "made.txt")
