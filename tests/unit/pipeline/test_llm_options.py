"""LLM mode: package `options` reach the provider's request, a key the provider has no field for
is refused (at turn time and by `cage validate`, with file, line and key path), and compaction
is on by default with a budget from the connector's context window."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.cli.validation import turn_refusals
from orchestrator.llm import estimate_tokens
from orchestrator.llm.compaction import SUMMARY_SYSTEM
from orchestrator.llm.messages import ChatMessage
from tests.fakes.mcp_servers.app import LlmApp
from tests.fakes.model_server import FakeModelServer
from tests.unit.pipeline.test_llm_turn import FALLBACK_ANSWER, requests_for, run_turn


@pytest.fixture
async def model() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer("text", host="127.0.0.1") as server:
        server.add_scenario("fallback", [{"text": FALLBACK_ANSWER}])
        yield server


@pytest.fixture
def app(tmp_path: Path, model: FakeModelServer) -> LlmApp:
    return LlmApp(tmp_path / "app", model.url)


def plain(app: LlmApp, name: str, **package: Any) -> str:
    """An assistant without MCP servers (prompts only), `package` keys added."""
    return app.assistant(name, servers=(), extra=package)


async def test_anthropic_gets_every_option_its_api_has(app: LlmApp, model: FakeModelServer) -> None:
    model.add_scenario("main", [{"text": "ok"}])
    options = {"temperature": 0.2, "top_p": 0.9, "stop": ["END"], "max_tokens": 321, "top_k": 7}
    turn = await run_turn(app, plain(app, "opts", options=options))
    assert turn.result.status == "completed", turn.result.error
    (request,) = requests_for(model, "main")
    body = request.body
    assert body["temperature"] == 0.2 and body["top_p"] == 0.9 and body["max_tokens"] == 321
    assert body["stop_sequences"] == ["END"]
    assert body["top_k"] == 7  # an extra provider key goes into the body as it is


async def test_openai_gets_every_typed_option_and_extra_keys(app: LlmApp, model: FakeModelServer) -> None:
    options = {
        "top_p": 0.5,
        "stop": "STOP",
        "seed": 42,
        "presence_penalty": 0.1,
        "frequency_penalty": 0.3,
        "reasoning_effort": "low",
        "max_completion_tokens": 77,
        "user": "cage-test",
    }
    turn = await run_turn(app, plain(app, "oai", options=options), connector="fallback")
    assert turn.result.content == FALLBACK_ANSWER
    (request,) = requests_for(model, "fallback")
    body = request.body
    assert body["top_p"] == 0.5 and body["stop"] == ["STOP"] and body["seed"] == 42
    assert body["presence_penalty"] == 0.1 and body["frequency_penalty"] == 0.3
    assert body["reasoning_effort"] == "low" and body["max_tokens"] == 77 and body["user"] == "cage-test"


async def test_anthropic_reasoning_effort_becomes_a_thinking_budget(
    app: LlmApp, model: FakeModelServer
) -> None:
    model.add_scenario("main", [{"text": "ok"}])
    await run_turn(app, plain(app, "effort", options={"reasoning_effort": "medium"}))
    (request,) = requests_for(model, "main")
    assert request.body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert request.body["max_tokens"] > 8192


async def test_an_option_the_provider_lacks_is_refused_with_file_line_and_key(
    app: LlmApp, model: FakeModelServer
) -> None:
    aid = plain(app, "seeded", options={"temperature": 0.1, "seed": 7})
    turn = await run_turn(app, aid)
    assert turn.result.status == "error" and turn.result.error is not None
    assert "options.seed" in turn.result.error and "Anthropic" in turn.result.error
    assert requests_for(model, "main") == []  # nothing was sent

    report = app.loader().load_all()
    refusals = [e for e in turn_refusals(app.root, report) if e.key_path.startswith("options.")]
    assert [(str(e.file), e.key_path, e.line) for e in refusals] == [
        ("assistants/tests/seeded/package.yao", "options.seed", 1)
    ]
    assert "has no 'seed' parameter" in refusals[0].reason


def _long_history(turns: int) -> list[dict[str, str]]:
    history: list[dict[str, str]] = []
    for n in range(turns):
        history.append({"role": "user", "content": f"question {n}: " + "lorem ipsum " * 150})
        history.append({"role": "assistant", "content": f"answer {n}: " + "dolor sit amet " * 150})
    return [*history, {"role": "user", "content": "the latest question"}]


async def test_a_long_conversation_is_compacted_under_the_budget(app: LlmApp, model: FakeModelServer) -> None:
    model.add_scenario("main", [{"text": "the answer"}])  # without tools, every request gets this text
    aid = plain(app, "long", compaction={"budget_tokens": 2000})
    messages = _long_history(12)
    whole = estimate_tokens("", [ChatMessage.user(m["content"]) for m in messages])
    assert whole > 2000 * 4
    turn = await run_turn(app, aid, messages=messages)
    assert turn.result.status == "completed", turn.result.error
    summary, answer = requests_for(model, "main")
    assert summary.body["system"] == SUMMARY_SYSTEM
    sent = json.dumps(answer.body["messages"])
    assert len(sent) // 4 < 2000  # what the model saw stays under the budget
    assert "<summary of the earlier conversation>" in sent and "the latest question" in sent
    assert "question 3" not in sent and turn.result.content == "the answer"


async def test_compaction_is_on_by_default_and_can_be_switched_off(
    app: LlmApp, model: FakeModelServer
) -> None:
    window = {
        "label": "small",
        "type": "anthropic",
        "options": {
            "model": "fake@main",
            "key": "k",
            "host": model.url,
            "capabilities": {"max_input_tokens": 4000},
        },
    }
    app.write("connectors/small.conn.yao", json.dumps(window))
    model.add_scenario("main", [{"text": "the answer"}])
    on = app.assistant("windowed", servers=(), extra={"connector": "small"})
    turn = await run_turn(app, on, messages=_long_history(8))
    assert turn.result.content == "the answer"
    first, second = requests_for(model, "main")
    assert first.body["system"] == SUMMARY_SYSTEM  # past 80% of 4000 less max_tokens: compacted
    assert len(second.body["messages"]) == 1

    off = app.assistant("uncompacted", servers=(), extra={"connector": "small", "compaction": False})
    turn = await run_turn(app, off, messages=_long_history(8))
    assert turn.result.content == "the answer"
    third = requests_for(model, "main")[2]
    assert third.body["system"] != SUMMARY_SYSTEM and len(third.body["messages"]) == 17
