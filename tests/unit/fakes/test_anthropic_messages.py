"""The fake server's Messages API, driven by the official `anthropic` SDK."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import pytest

from tests.fakes.model_server import FakeModelServer, input_tokens

BASH: Any = {
    "name": "Bash",
    "description": "Run a shell command",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
        "required": ["command"],
    },
}
READ: Any = {
    "name": "Read",
    "description": "Read a file",
    "input_schema": {
        "type": "object",
        "properties": {"file_path": {"type": "string"}},
        "required": ["file_path"],
    },
}
PROMPT: list[Any] = [{"role": "user", "content": "make hello.txt"}]


def test_text_non_streaming(claude: anthropic.Anthropic) -> None:
    message = claude.messages.create(model="m", max_tokens=100, messages=PROMPT)
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == "Hello from the fake model."  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"


def test_text_streaming_arrives_in_several_deltas(claude: anthropic.Anthropic) -> None:
    with claude.messages.stream(model="m", max_tokens=100, messages=PROMPT) as stream:
        deltas = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(deltas) > 1
    assert "".join(deltas) == "Hello from the fake model."
    assert final.stop_reason == "end_turn"


@pytest.mark.parametrize("streaming", [True, False])
def test_thinking_block_with_signature(claude: anthropic.Anthropic, streaming: bool) -> None:
    kwargs: dict[str, Any] = {"model": "scenario:thinking", "max_tokens": 100, "messages": PROMPT}
    if streaming:
        with claude.messages.stream(**kwargs) as stream:
            message = stream.get_final_message()
    else:
        message = claude.messages.create(**kwargs)
    thinking, answer = message.content
    assert thinking.type == "thinking"
    assert thinking.thinking == "Let me think about this."
    assert thinking.signature.startswith("sig_")
    assert answer.type == "text"
    assert answer.text == "The answer is 42."


def test_tool_call_json_is_reassembled_from_deltas(
    server: FakeModelServer, claude: anthropic.Anthropic
) -> None:
    args = {"file_path": '/w/a "quoted" näme.txt', "limit": 10, "nested": {"list": [1, 2, {"k": None}]}}
    server.add_scenario("read", [{"tool": "Read", "args": args}, {"text": "read it"}])
    partials: list[str] = []
    with claude.messages.stream(
        model="scenario:read",
        max_tokens=100,
        messages=PROMPT,
        tools=[BASH, READ],
    ) as stream:
        for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                partials.append(event.delta.partial_json)
        message = stream.get_final_message()
    assert len(partials) > 3
    (block,) = message.content
    assert block.type == "tool_use"
    assert block.name == "Read"
    assert block.input == args
    assert block.id.startswith("toolu_")
    assert message.stop_reason == "tool_use"


def test_shell_step_uses_the_offered_tool_and_advances_on_its_result(
    server: FakeModelServer, claude: anthropic.Anthropic
) -> None:
    first = claude.messages.create(
        model="scenario:hello", max_tokens=100, messages=PROMPT, tools=[BASH, READ]
    )
    (call,) = first.content
    assert call.type == "tool_use"
    assert call.name == "Bash"
    assert call.input["command"] == "echo hello > hello.txt"
    history: list[Any] = [
        *PROMPT,
        {"role": "assistant", "content": [call.model_dump(exclude_none=True)]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call.id, "content": ""},
                {"type": "text", "text": "<system-reminder>files changed</system-reminder>"},
            ],
        },
    ]
    second = claude.messages.create(model="scenario:hello", max_tokens=100, messages=history, tools=[BASH])
    assert second.content[0].type == "text"
    assert second.content[0].text == "done"
    # A new real prompt starts the script again; an injected reminder alone does not.
    again = claude.messages.create(
        model="scenario:hello",
        max_tokens=100,
        messages=[*history, {"role": "assistant", "content": "done"}, {"role": "user", "content": "again"}],
        tools=[BASH],
    )
    assert again.content[0].type == "tool_use"
    assert [r.step for r in server.requests] == [0, 1, 0]


def test_parallel_tool_calls_then_next_step_after_all_results(
    server: FakeModelServer, claude: anthropic.Anthropic
) -> None:
    server.add_scenario(
        "fan",
        [
            {
                "parts": [
                    {"text": "Reading both."},
                    {"tool": "Read", "args": {"file_path": "a"}},
                    {"tool": "Read", "args": {"file_path": "b"}},
                    {"shell": "ls"},
                ]
            },
            {"text": "all read"},
        ],
    )
    with claude.messages.stream(
        model="scenario:fan", max_tokens=100, messages=PROMPT, tools=[BASH, READ]
    ) as s:
        message = s.get_final_message()
    assert [b.type for b in message.content] == ["text", "tool_use", "tool_use", "tool_use"]
    calls = [b for b in message.content if b.type == "tool_use"]
    assert [(c.name, c.input) for c in calls] == [
        ("Read", {"file_path": "a"}),
        ("Read", {"file_path": "b"}),
        ("Bash", {"command": "ls", "description": "Run ls"}),
    ]
    assert len({c.id for c in calls}) == 3
    results = [{"type": "tool_result", "tool_use_id": c.id, "content": "ok"} for c in calls]
    history: list[Any] = [
        *PROMPT,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]},
        {"role": "user", "content": results},
    ]
    follow = claude.messages.create(
        model="scenario:fan", max_tokens=100, messages=history, tools=[BASH, READ]
    )
    assert follow.content[0].text == "all read"  # type: ignore[union-attr]


def test_side_request_without_tools_gets_the_final_text(claude: anthropic.Anthropic) -> None:
    title = claude.messages.create(model="scenario:hello", max_tokens=20, messages=PROMPT)
    assert title.content[0].text == "done"  # type: ignore[union-attr]


def test_usage_is_deterministic_and_logged(server: FakeModelServer, claude: anthropic.Anthropic) -> None:
    one = claude.messages.create(model="m", max_tokens=100, messages=PROMPT)
    two = claude.messages.create(model="m", max_tokens=100, messages=PROMPT)
    (record, _) = server.requests.all()
    assert one.usage.input_tokens == two.usage.input_tokens == input_tokens(record.body)
    assert one.usage.output_tokens == len("Hello from the fake model.") // 4 + 1
    assert record.usage is not None
    assert record.usage.output_tokens == one.usage.output_tokens


def test_streaming_usage_matches_non_streaming_counting(claude: anthropic.Anthropic) -> None:
    with claude.messages.stream(model="m", max_tokens=100, messages=PROMPT) as stream:
        final = stream.get_final_message()
    body = {"max_tokens": 100, "messages": PROMPT, "model": "m", "stream": True}
    assert final.usage.input_tokens == input_tokens(body)
    assert final.usage.output_tokens == 7


def test_count_tokens(claude: anthropic.Anthropic) -> None:
    counted = claude.messages.count_tokens(model="m", messages=PROMPT)
    assert counted.input_tokens == input_tokens({"model": "m", "messages": PROMPT})


def test_beta_query_and_path_without_v1(server: FakeModelServer) -> None:
    body = {"model": "m", "max_tokens": 10, "messages": PROMPT}
    for path in ("/v1/messages?beta=true", "/messages"):
        reply = httpx.post(f"{server.url}{path}", json=body, headers={"x-api-key": "k"})
        assert reply.status_code == 200
        assert reply.json()["content"][0]["text"] == "Hello from the fake model."
    assert [(r.path, r.query) for r in server.requests] == [("/v1/messages", "beta=true"), ("/messages", "")]


async def test_async_context_manager_and_async_client() -> None:
    async with FakeModelServer("thinking", host="127.0.0.1") as running:
        url = running.url
        async with anthropic.AsyncAnthropic(base_url=running.url, api_key="k", max_retries=0) as client:
            message = await client.messages.create(model="m", max_tokens=10, messages=PROMPT)
    assert [b.type for b in message.content] == ["thinking", "text"]
    with pytest.raises(RuntimeError):
        _ = running.port
    async with httpx.AsyncClient() as plain:
        with pytest.raises(httpx.ConnectError):
            await plain.get(f"{url}/v1/models")
