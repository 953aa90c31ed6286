"""The fake server's Responses API (what codex speaks), driven by the official `openai` SDK."""

from __future__ import annotations

import json
from typing import Any

import openai

from tests.fakes.model_server import FakeModelServer

EXEC: Any = {
    "type": "function",
    "name": "exec_command",
    "parameters": {
        "type": "object",
        "properties": {
            "cmd": {"type": "string"},
            "workdir": {"type": "string"},
            "yield_time_ms": {"type": "number"},
        },
        "required": ["cmd"],
    },
}
APPLY_PATCH: Any = {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark"}}
ORCH: Any = {
    "type": "namespace",
    "name": "mcp__orch",
    "tools": [{"type": "function", "name": "report", "parameters": {"type": "object", "properties": {}}}],
}
PROMPT: Any = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "instructions"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "make hello.txt"}]},
    {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "<environment_context>x"}],
    },
]


def test_streaming_function_call_then_text_after_its_output(
    server: FakeModelServer, oai: openai.OpenAI
) -> None:
    events = list(oai.responses.create(model="scenario:hello", input=PROMPT, tools=[EXEC], stream=True))
    kinds = [e.type for e in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    arguments = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    (done,) = [e.item for e in events if e.type == "response.output_item.done"]
    assert done.type == "function_call"
    assert done.name == "exec_command"
    assert json.loads(arguments) == json.loads(done.arguments) == {"cmd": "echo hello > hello.txt"}
    completed = events[-1].response  # type: ignore[union-attr]
    assert completed.usage is not None
    assert completed.usage.input_tokens == server.requests[0].usage.input_tokens  # type: ignore[union-attr]

    history = [
        *PROMPT,
        {"type": "function_call", "call_id": done.call_id, "name": done.name, "arguments": done.arguments},
        {"type": "function_call_output", "call_id": done.call_id, "output": "ok"},
    ]
    follow = list(oai.responses.create(model="scenario:hello", input=history, tools=[EXEC], stream=True))
    text = "".join(e.delta for e in follow if e.type == "response.output_text.delta")
    assert text == "done"
    assert follow[-1].response.output_text == "done"  # type: ignore[union-attr]
    assert [r.step for r in server.requests] == [0, 1]


def test_reasoning_summary_stream(oai: openai.OpenAI) -> None:
    events = list(oai.responses.create(model="scenario:thinking", input="why?", stream=True))
    summary = "".join(e.delta for e in events if e.type == "response.reasoning_summary_text.delta")
    assert summary == "Let me think about this."
    final = events[-1].response  # type: ignore[union-attr]
    assert [item.type for item in final.output] == ["reasoning", "message"]
    assert final.output_text == "The answer is 42."
    assert final.usage is not None
    assert final.usage.output_tokens_details.reasoning_tokens == 6


def test_namespace_tool_call_carries_the_namespace(server: FakeModelServer, oai: openai.OpenAI) -> None:
    server.add_scenario("mcp", [{"tool": "mcp__orch__report", "args": {"ok": True}}, {"text": "reported"}])
    events = list(oai.responses.create(model="scenario:mcp", input=PROMPT, tools=[EXEC, ORCH], stream=True))
    (item,) = [e.item for e in events if e.type == "response.output_item.done"]
    raw = item.model_dump()
    assert raw["name"] == "report"
    assert raw["namespace"] == "mcp__orch"
    assert json.loads(raw["arguments"]) == {"ok": True}


def test_freeform_apply_patch_streams_custom_tool_input(server: FakeModelServer, oai: openai.OpenAI) -> None:
    patch = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"
    server.add_scenario("patch", [{"tool": "apply_patch", "input": patch}, {"text": "patched"}])
    events = list(
        oai.responses.create(model="scenario:patch", input=PROMPT, tools=[EXEC, APPLY_PATCH], stream=True)
    )
    streamed = "".join(e.delta for e in events if e.type == "response.custom_tool_call_input.delta")
    (item,) = [e.item for e in events if e.type == "response.output_item.done"]
    assert item.type == "custom_tool_call"
    assert streamed == item.input == patch
    history = [
        *PROMPT,
        {"type": "custom_tool_call", "call_id": item.call_id, "name": "apply_patch", "input": patch},
        {"type": "custom_tool_call_output", "call_id": item.call_id, "output": "applied"},
    ]
    follow = oai.responses.create(model="scenario:patch", input=history, tools=[EXEC, APPLY_PATCH])
    assert follow.output_text == "patched"


def test_non_streaming_response(oai: openai.OpenAI) -> None:
    response = oai.responses.create(model="m", input="hi")
    assert response.status == "completed"
    assert response.output_text == "Hello from the fake model."
    assert response.usage is not None
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
