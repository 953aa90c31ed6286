"""Yao's TypeScript hook assistants run as their sources describe (tests/create, next,
agent-caller, messages of the dev app), through the real pipeline, node and SQLite."""

from __future__ import annotations

import json

import pytest

from tests.fakes.model_server import FakeModelServer
from tests.integration.yao.conftest import ANSWER, needs_node
from tests.pipeline_rig import Rig

pytestmark = [needs_node]


async def test_create_return_partial_rewrites_what_the_model_sees(
    yao_rig: Rig, yao_model_server: FakeModelServer
) -> None:
    before = len(yao_model_server.requests)
    ran = await yao_rig.run("tests.create", "return_partial")
    assert ran.result.status == "completed", ran.result.error
    assert ran.result.content == ANSWER
    [request] = yao_model_server.requests.all()[before:]
    body = request.body
    assert body["temperature"] == 0.5  # the hook's temperature
    users = [m for m in body["messages"] if m["role"] == "user"]
    assert users[-1]["content"] == "Partial test"  # the hook's messages replaced the input


async def test_create_return_full_keys_cage_does_not_act_on_are_dropped(yao_rig: Rig) -> None:
    ran = await yao_rig.run("tests.create", "return_full")  # returns audio and max_completion_tokens too
    assert ran.result.status == "completed", ran.result.error


async def test_create_calling_a_yao_process_fails_naming_it(yao_rig: Rig) -> None:
    ran = await yao_rig.run("tests.create", "return_process")
    assert ran.result.status == "error"
    assert "models.__yao.role.Get has no equivalent in Cage" in str(ran.result.error)


@pytest.mark.parametrize(
    ("scenario", "data"),
    [
        ("return_custom_data", {"message": "Custom response from Next Hook", "test": True}),
        ("return_data_with_metadata", {"result": "success", "value": 42}),
    ],
)
async def test_next_returns_its_data(yao_rig: Rig, scenario: str, data: dict[str, object]) -> None:
    ran = await yao_rig.run("tests.next", scenario)
    assert ran.result.status == "completed", ran.result.error
    assert isinstance(ran.result.data, dict)
    assert {k: ran.result.data[k] for k in data} == data


async def test_next_sees_the_completion(yao_rig: Rig) -> None:
    ran = await yao_rig.run("tests.next", "verify_payload")
    assert ran.result.status == "completed", ran.result.error
    text = json.dumps(ran.result.data)
    assert "Completion: has content" in text and "Error: none" in text


async def test_agent_caller_calls_another_assistant(yao_rig: Rig) -> None:
    ran = await yao_rig.run("tests.agent-caller", "call single")
    assert ran.result.status == "completed", ran.result.error
    texts = "\n".join(ran.texts())
    assert "Testing ctx.agent.Call()..." in texts
    assert "- Agent: tests.simple-greeting" in texts and f"- Content: {ANSWER}" in texts
    assert "- Error: None" in texts


async def test_agent_caller_all_runs_both(yao_rig: Rig) -> None:
    ran = await yao_rig.run("tests.agent-caller", "call all")
    assert ran.result.status == "completed", ran.result.error
    texts = "\n".join(ran.texts())
    assert "[0] Agent: tests.simple-greeting" in texts and "[1] Agent: tests.simple-greeting" in texts


async def test_messages_menu_streams_through_send_stream_append_end(yao_rig: Rig) -> None:
    ran = await yao_rig.run("tests.messages", "hello")
    assert ran.result.status == "completed", ran.result.error
    [menu] = ran.texts()
    assert menu.startswith("# 📋 Available Tests\n\nSend one of these keywords to run tests:")
    assert menu.endswith('Try: "show me code" or "test error"')


async def test_messages_basic_and_action_run_with_yao_only_widgets_left_out(yao_rig: Rig) -> None:
    basic = await yao_rig.run("tests.messages", "basic")
    assert basic.result.status == "completed", basic.result.error
    texts = "\n".join(basic.texts())
    # (the heading "Basic Message Types" comes out as "Basic *** Types": the redactor's `basic <token>`
    # auth pattern matches it; reported, orchestrator/redaction.py is not this area's)
    assert "## 📝 Streaming Text" in texts and "All basic tests completed!" in texts
    assert "![" in texts  # the image message, as markdown
    action = await yao_rig.run("tests.messages", "action")  # navigate/notify actions: CUI-only
    assert action.result.status == "completed", action.result.error
