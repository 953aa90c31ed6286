"""Scenario parsing, step selection, tool matching, scenario choice by model name, the request log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.fakes.model_server import (
    BUILTIN,
    FakeModelServer,
    Scenario,
    ShellPart,
    Step,
    TextPart,
    ToolPart,
    load_scenario,
    scenario,
    scenario_name,
)
from tests.fakes.model_server.tools import OfferedTool, pick_shell, shell_arguments

from .conftest import ANTHROPIC_KEY, OPENAI_KEY

PROMPT: Any = [{"role": "user", "content": "hi"}]


def test_step_shorthand_and_full_form_parse_alike() -> None:
    short = Step.model_validate({"shell": "ls", "delay": 0.5})
    full = Step.model_validate({"parts": [{"shell": "ls"}], "delay": 0.5})
    assert short == full
    assert short.parts == [ShellPart(shell="ls")]
    assert Step.model_validate({"tool": "apply_patch", "input": "p"}).parts == [
        ToolPart(tool="apply_patch", input="p")
    ]
    with pytest.raises(ValueError, match="fail_statuz"):
        Step.model_validate({"parts": [], "fail_statuz": 500})


def test_step_for_counts_every_call_of_a_parallel_step() -> None:
    script = scenario("s", [{"parts": [{"shell": "a"}, {"shell": "b"}]}, {"shell": "c"}, {"text": "end"}])
    assert [script.step_for(n) for n in range(5)] == [0, 0, 1, 2, 2]
    assert script.pick(4, has_tools=True) == (2, script.steps[2])


def test_finished_script_and_side_requests_get_the_last_text_step() -> None:
    ends_with_call = scenario("s", [{"text": "first"}, {"shell": "x"}])
    index, step = ends_with_call.pick(1, has_tools=True)
    assert (index, step.parts) == (0, [TextPart(text="first")])
    only_calls = scenario("c", [{"shell": "x"}])
    assert only_calls.pick(0, has_tools=False)[1].parts == [TextPart(text="done")]
    assert BUILTIN["hello"].pick(0, has_tools=False)[1].parts == [TextPart(text="done")]


def test_builtins_exist() -> None:
    assert set(BUILTIN) >= {"hello", "text", "thinking", "error500", "error401", "slow-tool", "hang"}
    assert BUILTIN["slow-tool"].steps[0].parts == [ShellPart(shell="sleep 60")]
    assert BUILTIN["error500"].steps[0].fail_status == 500


def test_load_scenario_from_a_list_or_an_object(tmp_path: Path) -> None:
    listed = tmp_path / "listed.json"
    listed.write_text(json.dumps([{"shell": "true"}, {"text": "ok"}]))
    named = tmp_path / "x.json"
    named.write_text(json.dumps({"name": "named", "steps": [{"text": "hi"}]}))
    assert load_scenario(listed) == Scenario(
        name="listed", steps=[Step(parts=[ShellPart(shell="true")]), Step(parts=[TextPart(text="ok")])]
    )
    assert load_scenario(named).name == "named"


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {
                "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
                "required": ["command"],
            },
            {"command": "ls -la", "description": "Run ls -la"},
        ),
        (
            {
                "properties": {"command": {"type": "array"}, "timeout_ms": {"type": "integer"}},
                "required": ["command", "timeout_ms"],
            },
            {"command": ["bash", "-lc", "ls -la"], "timeout_ms": 60000},
        ),
        (
            {"properties": {"cmd": {"type": "string"}, "workdir": {"type": "string"}}, "required": ["cmd"]},
            {"cmd": "ls -la"},
        ),
        (
            {
                "properties": {"script": {"type": "string"}, "login": {"type": "boolean", "default": True}},
                "required": ["script", "login"],
            },
            {"script": "", "login": True},
        ),
        ({}, {"command": "ls -la"}),
    ],
)
def test_shell_arguments_follow_the_tool_schema(schema: dict[str, Any], expected: dict[str, Any]) -> None:
    offered = OfferedTool(name="shell", call_name="shell", schema={"type": "object", **schema})
    assert shell_arguments(offered, "ls -la") == expected


def test_pick_shell_prefers_known_names() -> None:
    tools = [OfferedTool(name=n, call_name=n) for n in ("Read", "my_shell_tool", "exec_command", "Bash")]
    assert pick_shell(tools).name == "Bash"  # type: ignore[union-attr]
    assert pick_shell(tools[:2]).name == "my_shell_tool"  # type: ignore[union-attr]
    assert pick_shell(tools[:1]) is None


def test_scenario_name_from_model() -> None:
    assert scenario_name("scenario:hello") == "hello"
    assert scenario_name("fakellm/fake-model@slow-tool") == "slow-tool"
    assert scenario_name("claude-sonnet-4-5") is None


def test_scenario_is_chosen_by_model_name(server: FakeModelServer, claude: anthropic.Anthropic) -> None:
    server.add_scenario("alpha", [{"text": "from alpha"}])
    answers = [
        claude.messages.create(model=model, max_tokens=5, messages=PROMPT).content[-1].text  # type: ignore[union-attr]
        for model in ("scenario:alpha", "claude-x@alpha", "plain", "scenario:thinking")
    ]
    assert answers == ["from alpha", "from alpha", "Hello from the fake model.", "The answer is 42."]
    assert [r.scenario for r in server.requests] == ["alpha", "alpha", "text", "thinking"]
    server.set_scenario([Step(parts=[TextPart(text="new default")])])
    (block,) = claude.messages.create(model="plain", max_tokens=5, messages=PROMPT).content
    assert block.type == "text"
    assert block.text == "new default"


def test_unknown_scenario_is_a_404_in_the_api_shape(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError, match="unknown scenario 'nope'"):
        oai.chat.completions.create(model="m@nope", messages=PROMPT)


def test_request_log_keeps_body_and_drops_credentials(
    server: FakeModelServer, claude: anthropic.Anthropic, oai: openai.OpenAI
) -> None:
    claude.messages.create(
        model="m", max_tokens=5, messages=PROMPT, extra_headers={"authorization": "Bearer tok-123456"}
    )
    oai.chat.completions.create(model="scenario:text", messages=PROMPT)
    first, second = server.requests.wait_for(2)
    assert (first.api, first.path, first.scenario, first.step, first.status) == (
        "anthropic",
        "/v1/messages",
        "text",
        0,
        200,
    )
    assert first.body == {"model": "m", "max_tokens": 5, "messages": PROMPT}
    assert first.headers["anthropic-version"]
    assert first.reply is not None
    assert first.reply.text == "Hello from the fake model."
    assert (second.api, second.path) == ("openai-chat", "/v1/chat/completions")
    dumped = json.dumps([r.model_dump(mode="json") for r in server.requests])
    assert ANTHROPIC_KEY not in dumped
    assert OPENAI_KEY not in dumped
    assert "tok-123456" not in dumped
    assert not {"authorization", "x-api-key"} & (first.headers.keys() | second.headers.keys())


def test_models_lists_registered_scenarios(server: FakeModelServer, oai: openai.OpenAI) -> None:
    server.add_scenario("listed", [{"text": "x"}])
    ids = [m.id for m in oai.models.list()]
    assert "fake-model" in ids
    assert {"scenario:listed", "scenario:hello"} <= set(ids)


def test_invalid_json_body_is_a_400(server: FakeModelServer) -> None:
    reply = httpx.post(f"{server.url}/v1/chat/completions", content=b"{nope")
    assert reply.status_code == 400
    assert reply.json()["error"]["type"] == "invalid_request_error"


def test_unknown_routes_are_logged(server: FakeModelServer) -> None:
    reply = httpx.get(f"{server.url}/v1/whatever?x=1", headers={"x-api-key": "sk-should-not-appear"})
    assert reply.status_code == 404
    (record,) = server.requests
    assert (record.api, record.path, record.query, record.status) == ("unknown", "/v1/whatever", "x=1", 404)
    assert "x-api-key" not in record.headers


def test_root_answers_head_for_connection_warm_up(server: FakeModelServer) -> None:
    assert httpx.head(server.url).status_code == 200
    assert [(r.method, r.api) for r in server.requests] == [("HEAD", "root")]
