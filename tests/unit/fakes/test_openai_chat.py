"""The fake server's Chat Completions API, driven by the official `openai` SDK."""

from __future__ import annotations

import json
from typing import Any

import openai

from tests.fakes.model_server import FakeModelServer, input_tokens

BASH: Any = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a command",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "description": {"type": "string"},
                "timeout": {"type": "number"},
            },
            "required": ["command", "description"],
        },
    },
}
EDIT: Any = {
    "type": "function",
    "function": {
        "name": "edit",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}
PROMPT: Any = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "go"}]


def _collect(stream: Any) -> tuple[str, str, dict[int, dict[str, str]], list[str], Any]:
    """Reassemble a chat stream: content, reasoning, tool calls by index, finish reasons, usage."""
    content, reasoning, finishes, usage = "", "", [], None
    calls: dict[int, dict[str, str]] = {}
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            content += delta.content or ""
            reasoning += getattr(delta, "reasoning_content", None) or ""
            for tc in delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] += tc.id or ""
                if tc.function is not None:
                    slot["name"] += tc.function.name or ""
                    slot["arguments"] += tc.function.arguments or ""
            if choice.finish_reason:
                finishes.append(choice.finish_reason)
    return content, reasoning, calls, finishes, usage


def test_text_and_reasoning_streaming_with_usage_chunk(oai: openai.OpenAI) -> None:
    stream = oai.chat.completions.create(
        model="scenario:thinking", messages=PROMPT, stream=True, stream_options={"include_usage": True}
    )
    content, reasoning, calls, finishes, usage = _collect(stream)
    assert content == "The answer is 42."
    assert reasoning == "Let me think about this."
    assert calls == {}
    assert finishes == ["stop"]
    body = {
        "model": "scenario:thinking",
        "messages": PROMPT,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert usage.prompt_tokens == input_tokens(body)
    assert usage.completion_tokens_details.reasoning_tokens == 6
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_no_usage_chunk_unless_asked(oai: openai.OpenAI) -> None:
    *_, usage = _collect(oai.chat.completions.create(model="m", messages=PROMPT, stream=True))
    assert usage is None


def test_non_streaming_text_and_reasoning(oai: openai.OpenAI) -> None:
    completion = oai.chat.completions.create(model="scenario:thinking", messages=PROMPT)
    message = completion.choices[0].message
    assert message.content == "The answer is 42."
    assert message.reasoning_content == "Let me think about this."  # type: ignore[attr-defined]
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 11


def test_parallel_tool_calls_stream_and_step_advances(server: FakeModelServer, oai: openai.OpenAI) -> None:
    server.add_scenario(
        "pair",
        [
            {
                "parts": [
                    {"shell": "echo hello > hello.txt"},
                    {"tool": "edit", "args": {"path": 'ä/b "c".py'}},
                ]
            },
            {"text": "both done"},
        ],
    )
    stream = oai.chat.completions.create(
        model="scenario:pair", messages=PROMPT, tools=[BASH, EDIT], stream=True
    )
    content, _, calls, finishes, _ = _collect(stream)
    assert content == ""
    assert finishes == ["tool_calls"]
    assert [calls[i]["name"] for i in sorted(calls)] == ["bash", "edit"]
    assert json.loads(calls[0]["arguments"]) == {
        "command": "echo hello > hello.txt",
        "description": "Run echo hello > hello.txt",
    }
    assert json.loads(calls[1]["arguments"]) == {"path": 'ä/b "c".py'}
    history = [
        *PROMPT,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls.values()
            ],
        },
        *({"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls.values()),
    ]
    follow = oai.chat.completions.create(model="scenario:pair", messages=history, tools=[BASH, EDIT])
    assert follow.choices[0].message.content == "both done"
    assert [r.step for r in server.requests] == [0, 1]


def test_non_streaming_tool_call(server: FakeModelServer, oai: openai.OpenAI) -> None:
    completion = oai.chat.completions.create(model="scenario:hello", messages=PROMPT, tools=[BASH])
    (call,) = completion.choices[0].message.tool_calls or []
    assert call.function.name == "bash"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments)["command"] == "echo hello > hello.txt"  # type: ignore[union-attr]
    assert completion.choices[0].finish_reason == "tool_calls"


def test_tool_not_offered_is_skipped_and_script_finishes(server: FakeModelServer, oai: openai.OpenAI) -> None:
    server.add_scenario("missing", [{"tool": "Nope", "args": {}}, {"text": "fallback"}])
    completion = oai.chat.completions.create(model="scenario:missing", messages=PROMPT, tools=[BASH])
    assert completion.choices[0].message.tool_calls is None
    assert completion.choices[0].message.content == "done"


def test_finished_script_replays_its_last_text(server: FakeModelServer, oai: openai.OpenAI) -> None:
    history = [
        *PROMPT,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "ok"},
    ]
    completion = oai.chat.completions.create(model="scenario:hello", messages=history, tools=[BASH])
    assert completion.choices[0].message.content == "done"
    assert server.requests[0].step == 1
