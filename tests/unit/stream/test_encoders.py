"""Encoders on the recorded golden turn, and the OpenAI stream read back by the official client.

Regenerate the goldens with `python -m tests.golden.stream.regenerate` and review the diff.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion

from orchestrator.stream import (
    CountingIds,
    Event,
    JSONLEncoder,
    OpenAIChunkEncoder,
    SessionEmitter,
    TurnBuilder,
    Usage,
    aggregate_completion,
    encode_all,
    event_json,
    parse_jsonl,
)
from tests.golden.stream.regenerate import EVENTS, HERE, MODEL, render_outputs
from tests.golden.stream.scenario import build_turn, ticking

GOLDEN_FILES = ["turn.sse", "turn.jsonl", "turn.ws", "turn.openai.sse", "turn.openai.json"]
REGEN = "run `python -m tests.golden.stream.regenerate` and review the diff"


def _recorded() -> list[Event]:
    return parse_jsonl(EVENTS.read_text(encoding="utf-8"))


def test_scenario_still_produces_the_recorded_events() -> None:
    assert encode_all(JSONLEncoder(), build_turn()) == EVENTS.read_text(encoding="utf-8"), REGEN


@pytest.mark.parametrize("name", GOLDEN_FILES)
def test_encoder_output_matches_golden(name: str) -> None:
    expected = (HERE / name).read_text(encoding="utf-8")
    assert render_outputs(_recorded())[name] == expected, REGEN


def test_native_sse_frames_carry_seq_ids_and_event_json() -> None:
    text = (HERE / "turn.sse").read_text(encoding="utf-8")
    frames = text.split("\n\n")[:-1]
    recorded = _recorded()
    assert len(frames) == len(recorded)
    for frame, event in zip(frames, recorded, strict=True):
        id_line, data_line = frame.split("\n")
        assert id_line == f"id: {event.seq}"
        assert data_line == f"data: {event_json(event)}"


@contextmanager
def _client(body: bytes) -> Iterator[tuple[openai.OpenAI, list[httpx.Request]]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    with httpx.Client(transport=httpx.MockTransport(handler)) as http:
        yield openai.OpenAI(api_key="test-key", base_url="http://cage.test/v1", http_client=http), seen


def _stream(client: openai.OpenAI) -> openai.Stream[openai.types.chat.ChatCompletionChunk]:
    return client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "list the files"}],
        stream=True,
        stream_options={"include_usage": True},
    )


def test_official_client_reassembles_the_openai_stream() -> None:
    body = encode_all(OpenAIChunkEncoder(model=MODEL, include_usage=True), _recorded()).encode()
    content, reasoning, results, finish = [], [], [], []
    calls: dict[int, dict[str, str]] = {}
    roles = []
    usage = None
    with _client(body) as (client, seen):
        for chunk in _stream(client):
            assert chunk.object == "chat.completion.chunk" and chunk.model == MODEL
            usage = chunk.usage or usage
            for choice in chunk.choices:
                delta = choice.delta
                roles.append(delta.role)
                content.append(delta.content or "")
                reasoning.append((delta.model_extra or {}).get("reasoning_content") or "")
                for tc in delta.tool_calls or []:
                    call = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] = tc.id or call["id"]
                    if tc.function is not None:
                        call["name"] = tc.function.name or call["name"]
                        call["arguments"] += tc.function.arguments or ""
                if (delta.model_extra or {}).get("cage_tool_result"):
                    results.append(delta.model_extra["cage_tool_result"])  # type: ignore[index]
                if choice.finish_reason:
                    finish.append(choice.finish_reason)
    assert seen[0].url.path == "/v1/chat/completions"
    assert roles[0] == "assistant" and roles.count("assistant") == 1
    assert "".join(content) == "Let me look at the workspace.\n\nThe workspace holds `README.md` and `src/`."
    assert "".join(reasoning) == "The user wants the files listed; run ls."
    assert calls == {0: {"id": "toolu_01", "name": "Bash", "arguments": '{"command": "ls -a"}'}}
    assert json.loads(calls[0]["arguments"]) == {"command": "ls -a"}
    assert results == [
        {
            "tool_call_id": "toolu_01",
            "name": "Bash",
            "status": "completed",
            "output": ".\n..\nREADME.md\nsrc\n",
            "is_error": False,
            "exit_code": 0,
        }
    ]
    assert finish == ["stop"]
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (2500, 65, 2565)
    assert usage.prompt_tokens_details is not None and usage.prompt_tokens_details.cached_tokens == 2200
    assert usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == 12


def test_aggregate_is_a_valid_openai_chat_completion() -> None:
    data = aggregate_completion(_recorded(), model=MODEL).model_dump(mode="json", exclude_none=True)
    completion = ChatCompletion.model_validate(data)
    choice = completion.choices[0]
    assert completion.object == "chat.completion" and completion.id == "chatcmpl-turn-1"
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert (
        choice.message.content
        == "Let me look at the workspace.\n\nThe workspace holds `README.md` and `src/`."
    )
    assert (choice.message.model_extra or {})[
        "reasoning_content"
    ] == "The user wants the files listed; run ls."
    assert choice.message.tool_calls is not None and len(choice.message.tool_calls) == 1
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.id == "toolu_01"
    assert (call.function.name, json.loads(call.function.arguments)) == ("Bash", {"command": "ls -a"})
    assert completion.usage is not None and completion.usage.total_tokens == 2565


def _stamped(raw: list[Event]) -> list[Event]:
    return SessionEmitter("s", clock=ticking(1_700_000_000_000, 1)).stamp_all(raw, turn_id="t9")


def test_error_event_becomes_an_error_chunk_the_client_raises() -> None:
    b = TurnBuilder(CountingIds(), clock=lambda: 0)
    raw = b.stream_start("a.b") + b.text("partial") + b.error("model overloaded", "runner_failed")
    raw += b.stream_end("error", error="model overloaded")
    events = _stamped(raw)
    body = encode_all(OpenAIChunkEncoder(), events)
    assert body.count('data: {"error":') == 1 and body.endswith("data: [DONE]\n\n")
    assert '"cage_status":"error"' in body
    with _client(body.encode()) as (client, _), pytest.raises(openai.APIError, match="model overloaded"):
        for _chunk in _stream(client):
            pass
    aggregate = aggregate_completion(events)
    assert aggregate.cage_error is not None and aggregate.cage_error.code == "runner_failed"
    assert aggregate.choices[0].cage_status == "error" and aggregate.choices[0].message.content == "partial"


def test_failed_turn_without_error_event_still_sends_an_error_chunk() -> None:
    b = TurnBuilder(CountingIds(), clock=lambda: 0)
    events = _stamped(b.stream_start("a.b") + b.stream_end("error", error="container died"))
    frames = encode_all(OpenAIChunkEncoder(), events).split("\n\n")
    assert frames[-2:] == ["data: [DONE]", ""]
    assert json.loads(frames[0].removeprefix("data: ")) == {
        "error": {"message": "container died", "type": "turn_failed", "code": "turn_failed"}
    }


def test_cancelled_and_truncated_turns_end_with_stop_and_a_cage_status() -> None:
    b = TurnBuilder(CountingIds(), clock=lambda: 0)
    events = _stamped(b.stream_start("a.b") + b.text("half") + b.stream_end("cancelled"))
    assert aggregate_completion(events).choices[0].cage_status == "cancelled"
    encoder = OpenAIChunkEncoder()
    text = "".join(encoder.encode(e) for e in events[:-2])  # no stream_end: the producer vanished
    text += encoder.close()
    assert text.endswith('"finish_reason":"stop","cage_status":"cancelled"}]}\n\ndata: [DONE]\n\n')
    assert encoder.close() == ""


def test_max_tokens_stop_reason_maps_to_length() -> None:
    b = TurnBuilder(CountingIds(), clock=lambda: 0)
    raw = b.stream_start("a.b") + b.text("cut") + b.result(stop_reason="max_tokens") + b.stream_end()
    completion = ChatCompletion.model_validate(
        aggregate_completion(_stamped(raw)).model_dump(exclude_none=True)
    )
    assert completion.choices[0].finish_reason == "length"


def test_llm_tool_calls_and_their_execution_share_one_openai_call() -> None:
    b = TurnBuilder(CountingIds(), clock=lambda: 0)
    raw = b.stream_start("a.b") + b.tool_call(0, '{"q":', id="call_1", name="search")
    raw += b.tool_call(0, '"cats"}')
    raw += b.tool_started("call_1", "search", {"q": "cats"}) + b.tool_finished("call_1", "3 results")
    raw += b.usage(Usage(input_tokens=7, output_tokens=2)) + b.stream_end()
    completion = aggregate_completion(_stamped(raw))
    message = completion.choices[0].message
    assert message.tool_calls is not None and len(message.tool_calls) == 1
    assert message.tool_calls[0].function.arguments == '{"q":"cats"}'
    assert message.cage_tool_results is not None and message.cage_tool_results[0].output == "3 results"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (7, 2)


def test_nested_stream_end_does_not_finish_the_completion() -> None:
    b = TurnBuilder(CountingIds(), clock=lambda: 0)
    child = b.child("th-1")
    raw = b.stream_start("a.b") + child.stream_start("helper") + child.text("sub") + child.stream_end()
    raw += b.text("main") + b.stream_end()
    body = encode_all(OpenAIChunkEncoder(), _stamped(raw))
    assert body.count("data: [DONE]") == 1 and body.count('"finish_reason":"stop"') == 1
    assert aggregate_completion(_stamped(raw)).choices[0].message.content == "sub\n\nmain"
