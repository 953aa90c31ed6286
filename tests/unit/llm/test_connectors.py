"""Connectors against the fake model server through the official SDKs: text, thinking, tool
calls, usage, retries, and the failures that must end in a `ModelError` instead of a hang."""

from __future__ import annotations

import time

import anyio
import pytest
from pydantic import SecretStr

from orchestrator.dsl.connectors import ConnectorSpec, ConnectorType, ThinkingConfig
from orchestrator.errors import ModelError
from orchestrator.llm import (
    ChatMessage,
    ModelClient,
    ModelRequest,
    StepAssembler,
    StopDelta,
    TextDelta,
    ThinkingDelta,
    ToolCallBlock,
    ToolSpec,
    UsageDelta,
    client_for,
    model_options,
)
from orchestrator.llm.deltas import ModelDelta
from tests.fakes.model_server import FakeModelServer
from tests.unit.llm.conftest import KEY, PROVIDERS, MakeClient

READ_TOOL = ToolSpec(
    name="read",
    description="Read a file",
    input_schema={
        "type": "object",
        "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}},
        "required": ["path"],
    },
)


def _request(*tools: ToolSpec, prompt: str = "hi") -> ModelRequest:
    return ModelRequest(system="You are a test.", messages=(ChatMessage.user(prompt),), tools=tools)


async def _collect(client: ModelClient, request: ModelRequest, limit: float = 20.0) -> list[ModelDelta]:
    out: list[ModelDelta] = []
    with anyio.fail_after(limit):
        async for delta in client.stream(request):
            out.append(delta)
    return out


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_text_streams_in_deltas_and_ends_with_a_stop(
    server: FakeModelServer, make_client: MakeClient, provider: str
) -> None:
    deltas = await _collect(make_client(provider, scenario="text"), _request())
    texts = [d.text for d in deltas if isinstance(d, TextDelta)]
    assert len(texts) > 1
    assert "".join(texts) == "Hello from the fake model."
    stops = [d for d in deltas if isinstance(d, StopDelta)]
    assert [s.reason for s in stops] == ["end_turn"]
    record = server.requests.all()[-1]
    assert record.body["system" if provider == "anthropic" else "messages"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_thinking_becomes_thinking_deltas(
    server: FakeModelServer, make_client: MakeClient, provider: str
) -> None:
    deltas = await _collect(make_client(provider, scenario="thinking"), _request())
    assembler = StepAssembler()
    for d in deltas:
        assembler.feed(d)
    message = assembler.message()
    thought = "".join(d.text for d in deltas if isinstance(d, ThinkingDelta))
    assert thought == "Let me think about this."
    assert message.text == "The answer is 42."
    if provider == "anthropic":
        signature = message.content[0]
        assert getattr(signature, "signature", "").startswith("sig_")
    else:
        usage = [d.usage for d in deltas if isinstance(d, UsageDelta)][-1]
        assert usage.reasoning_tokens == server.requests.all()[-1].usage.reasoning_tokens > 0  # type: ignore[union-attr]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_parallel_tool_calls_are_reassembled(
    server: FakeModelServer, make_client: MakeClient, provider: str
) -> None:
    server.add_scenario(
        "two-reads",
        [
            {
                "parts": [
                    {"text": "Reading."},
                    {"tool": "read", "args": {"path": "src/a_rather_long_name.py", "offset": 12}},
                    {"tool": "read", "args": {"path": "b.txt"}},
                ]
            },
            {"text": "done"},
        ],
    )
    deltas = await _collect(make_client(provider, scenario="two-reads"), _request(READ_TOOL))
    assembler = StepAssembler()
    for d in deltas:
        assembler.feed(d)
    message = assembler.message()
    calls = message.tool_calls
    assert [(c.name, c.arguments) for c in calls] == [
        ("read", {"path": "src/a_rather_long_name.py", "offset": 12}),
        ("read", {"path": "b.txt"}),
    ]
    assert all(isinstance(c, ToolCallBlock) and c.id for c in calls)
    assert len({c.id for c in calls}) == 2
    assert assembler.stop == "tool_use"
    assert message.text == "Reading."
    assert assembler.bad_arguments == {}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_usage_is_mapped_to_the_protocol_usage(
    server: FakeModelServer, make_client: MakeClient, provider: str
) -> None:
    deltas = await _collect(make_client(provider, scenario="text"), _request())
    usage = [d.usage for d in deltas if isinstance(d, UsageDelta)][-1]
    expected = server.requests.all()[-1].usage
    assert expected is not None
    assert usage.input_tokens == expected.input_tokens > 0
    assert usage.output_tokens == expected.output_tokens > 0
    assert usage.scope == "step"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_429_then_success_is_retried(
    server: FakeModelServer, make_client: MakeClient, provider: str
) -> None:
    server.add_scenario(
        "flaky", [{"text": "after the storm", "fail_status": 429, "fail_times": 2, "retry_after_ms": 20}]
    )
    deltas = await _collect(make_client(provider, scenario="flaky"), _request())
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == "after the storm"
    assert [r.status for r in server.requests.for_scenario("flaky")] == [429, 429, 200]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_500_forever_is_a_typed_error_after_the_retry_budget(
    server: FakeModelServer, make_client: MakeClient, provider: str
) -> None:
    server.add_scenario("down", [{"text": "never", "fail_status": 500, "retry_after_ms": 20}])
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        await _collect(make_client(provider, scenario="down", max_retries=2), _request())
    assert time.monotonic() - started < 10
    assert caught.value.status == 500
    assert caught.value.retryable is True
    assert len(server.requests.for_scenario("down")) == 3
    assert KEY not in str(caught.value)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_401_is_not_retried_and_not_retryable(
    server: FakeModelServer, make_client: MakeClient, provider: str
) -> None:
    with pytest.raises(ModelError) as caught:
        await _collect(make_client(provider, scenario="error401"), _request())
    assert caught.value.status == 401
    assert caught.value.retryable is False
    assert len(server.requests.for_scenario("error401")) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_cut_midway_is_an_error_not_a_hang(
    server: FakeModelServer, make_client: MakeClient, provider: str
) -> None:
    server.add_scenario("cut", [{"text": "this answer is much longer than a few events", "cut_after": 4}])
    started = time.monotonic()
    received: list[ModelDelta] = []
    with pytest.raises(ModelError) as caught:
        with anyio.fail_after(15):
            async for delta in make_client(provider, scenario="cut").stream(_request()):
                received.append(delta)
    assert time.monotonic() - started < 10
    assert caught.value.retryable is True
    assert not any(isinstance(d, StopDelta) for d in received)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_hanging_stream_times_out(
    server: FakeModelServer, make_client: MakeClient, provider: str
) -> None:
    server.add_scenario(
        "stuck", [{"text": "this reply never finishes at all", "hang_after": 3, "keepalive": 0.2}]
    )
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        await _collect(make_client(provider, scenario="stuck", timeout=1.0), _request())
    elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 5
    assert "1s" in str(caught.value)


async def test_client_for_a_connector_spec_and_its_options() -> None:
    spec = ConnectorSpec(
        id="claude",
        label="Claude",
        type=ConnectorType.ANTHROPIC,
        model="claude-x",
        base_url="http://127.0.0.1:1",
        key=SecretStr(KEY),
        max_tokens=1000,
        temperature=0.3,
        thinking=ThinkingConfig(type="enabled", budget_tokens=3000),
    )
    client = client_for(spec)
    assert client.model == "claude-x"
    await client.aclose()
    assert type(client).__name__ == "AnthropicClient"
    assert KEY not in repr(spec)
    options = model_options(spec)
    assert (options.max_tokens, options.temperature, options.thinking, options.thinking_budget) == (
        1000,
        0.3,
        True,
        3000,
    )
    openai_spec = spec.model_copy(update={"type": ConnectorType.OPENAI, "thinking": None, "max_tokens": None})
    other = client_for(openai_spec)
    assert type(other).__name__ == "OpenAIClient"
    await other.aclose()
    assert model_options(openai_spec).max_tokens == 4096
