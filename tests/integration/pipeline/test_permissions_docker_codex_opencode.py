"""codex and opencode ask through Cage: the real CLI in its real image, the fake model server's
scripted tool calls, the pipeline's broker (a `permissions` policy in sandbox.yao), answers
delivered the way the API delivers them.

Per runner: a denied `bash` call never runs (checked in the container) and the model receives
the refusal; an approved one runs and "allow always" stops asking on the next turn; no answer
applies the policy's default; an opencode question round-trips into its tool result (codex exec
has no question tool).
"""

from __future__ import annotations

import uuid
from typing import Any

import docker
import pytest

from tests.fakes.assistants import write_assistant, write_connector
from tests.fakes.model_server import FakeModelServer
from tests.integration.pipeline.test_permissions_docker import (
    MAKE,
    REFUSAL,
    decide,
    in_box,
    props,
    run,
    tool_results,
)
from tests.integration.pipeline.test_pipeline_docker import boxes
from tests.pipeline_rig import Rig

RUNNERS = ("codex", "opencode")
MODEL = {"codex": "gpt-5.5", "opencode": "fake-model"}
WORKSPACE = "/workspace"


def assistant(rig: Rig, server: FakeModelServer, runner: str, scenario: str, *, timeout: str = "5m") -> str:
    """An assistant of `runner` whose policy asks for every call (timeout: the default denies)."""
    name = f"perm-{runner}-{scenario}-{uuid.uuid4().hex[:6]}"
    write_connector(
        rig.root,
        name,
        kind="openai",
        model=f"{MODEL[runner]}@{scenario}",
        host=server.url + "/v1",
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
    model_server.add_scenario(
        "perm-ask-opencode",
        [
            {
                "tool": "question",
                "args": {
                    "questions": [
                        {
                            "question": "Which colour?",
                            "header": "Colour",
                            "options": [
                                {"label": "red", "description": "warm"},
                                {"label": "blue", "description": "cool"},
                            ],
                        }
                    ]
                },
            },
            {"text": "ok"},
        ],
    )


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
    results = [r for r in tool_results(model_server, "perm-make") if REFUSAL in r]
    assert results, tool_results(model_server, "perm-make")


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


async def test_an_opencode_question_round_trips_into_the_tool_result(
    e2e: Rig, model_server: FakeModelServer
) -> None:
    scenario = "perm-ask-opencode"
    assistant_id = assistant(e2e, model_server, "opencode", scenario)

    async def answer(rig: Rig, session_id: str, question: Any) -> None:
        assert question.text == "Which colour?" and tuple(question.options) == ("red", "blue")
        await rig.service.respond_question(session_id, question.request_id, "blue, definitely")

    events = await run(e2e, assistant_id, f"chat-{uuid.uuid4().hex[:8]}", None, answer)
    assert len(props(events, "question")) == 1
    assert props(events, "permission/request") == []  # the question tool itself is not a permission
    results = tool_results(model_server, scenario)
    assert any("blue, definitely" in text for text in results), results
