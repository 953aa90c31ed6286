"""LLM mode through the pipeline, against the fake model server: the model sees what a Create
hook wrote; a Create delegation never calls the model; history reaches the model; the stream is
well-formed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from anyio.abc import TaskGroup

from orchestrator.store import Store
from tests.fakes.assistants import write_assistant, write_connector
from tests.fakes.model_server import FakeModelServer
from tests.pipeline_rig import Rig
from tests.unit.sandbox.fakes import FakeBackend

KEY = "sk-fake-llm-mode-key-000123"
PROMPTS = "- role: system\n  content: You are terse.\n"


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer("text", host="127.0.0.1") as running:
        yield running


@pytest.fixture
def llm_rig(
    app_root: Path, store: Store, server: FakeModelServer, tmp_path: Path, turn_tasks: TaskGroup
) -> Rig:
    write_connector(
        app_root, "fake", kind="openai", model="fake-model@text", host=server.url + "/v1", key_env="K"
    )
    package = {"name": "llm", "connector": "fake"}
    write_assistant(app_root, "llm.plain", package=package, prompts=PROMPTS)
    write_assistant(
        app_root,
        "llm.rewriter",
        package=package,
        prompts=PROMPTS,
        hooks=(
            "async def create(ctx, messages, options):\n"
            "    return {'messages': [{'role': 'user', 'content': 'REWRITTEN ' + messages[-1]['content']}],\n"
            "            'temperature': 0.25}\n"
            "async def next(ctx, payload, options):\n"
            "    return {'data': {'completion': payload['completion'], 'temperature': options['temperature']}}\n"
        ),
    )
    write_assistant(
        app_root,
        "llm.delegator",
        package=package,
        prompts=PROMPTS,
        hooks=(
            "async def create(ctx, messages, options):\n    return {'delegate': {'agent_id': 'hooks.echo'}}\n"
        ),
    )
    return Rig.build(
        app_root, store, FakeBackend(), tasks=turn_tasks, data_dir=tmp_path / "d", environ={"K": KEY}
    )


def user_texts(body: dict[str, object]) -> list[str]:
    messages = body["messages"]
    assert isinstance(messages, list)
    out = []
    for m in messages:
        if m["role"] == "user":
            content = m["content"]
            out.append(content if isinstance(content, str) else "".join(p.get("text", "") for p in content))
    return out


async def test_llm_turn_is_well_formed_and_persisted(llm_rig: Rig, server: FakeModelServer) -> None:
    ran = await llm_rig.run("llm.plain", "hello model", session_id="chat-llm")
    await llm_rig.service.aclose()
    assert ran.result.status == "completed", ran.result.error
    assert ran.result.content and ran.texts() == [ran.result.content]
    assert ran.result.usage is not None and ran.result.usage.input_tokens > 0
    [request] = [r for r in server.requests.all() if r.api == "openai-chat"]
    assert user_texts(request.body) == ["hello model"]
    history = await llm_rig.store.messages.history("chat-llm")
    assert [m.content for m in history] == ["hello model", ran.result.content]
    assert KEY not in json.dumps([e.model_dump(mode="json") for e in ran.events])


async def test_history_reaches_the_model(llm_rig: Rig, server: FakeModelServer) -> None:
    first = await llm_rig.run("llm.plain", "first question", session_id="chat-h2")
    await llm_rig.run("llm.plain", "second question", session_id="chat-h2")
    await llm_rig.service.aclose()
    last = [r for r in server.requests.all() if r.api == "openai-chat"][-1]
    messages = last.body["messages"]
    assert [m["role"] for m in messages if m["role"] != "system"] == ["user", "assistant", "user"]
    assert user_texts(last.body) == ["first question", "second question"]
    assert first.result.content in json.dumps(messages)


async def test_turns_share_the_model_connection_until_the_pipeline_closes(
    llm_rig: Rig, server: FakeModelServer
) -> None:
    """Three LLM turns of two sessions reach the model over one connection (no TCP or TLS handshake
    per turn); closing the pipeline closes it."""
    for session in ("chat-c1", "chat-c2", "chat-c1"):
        ran = await llm_rig.run("llm.plain", "a question", session_id=session)
        assert ran.result.status == "completed", ran.result.error
    pool = llm_rig.service.connections.pool("openai", lambda: pytest.fail("no pool was made"))
    assert pool is not None and not pool.is_closed
    await llm_rig.service.aclose()
    assert pool.is_closed
    peers = [r.peer for r in server.requests.all() if r.api == "openai-chat"]
    assert len(peers) == 3 and len(set(peers)) == 1 and peers[0], peers


async def test_create_hook_rewrites_what_the_model_sees(llm_rig: Rig, server: FakeModelServer) -> None:
    ran = await llm_rig.run("llm.rewriter", "original")
    await llm_rig.service.aclose()
    [request] = [r for r in server.requests.all() if r.api == "openai-chat"]
    assert user_texts(request.body) == ["REWRITTEN original"]
    assert request.body.get("temperature") == 0.25
    data = ran.result.data
    assert isinstance(data, dict)
    assert data["temperature"] == 0.25
    assert data["completion"]["content"] == ran.result.content
    assert data["completion"]["status"] == "completed"


async def test_create_delegation_never_calls_the_model(llm_rig: Rig, server: FakeModelServer) -> None:
    ran = await llm_rig.run("llm.delegator", "route me")
    await llm_rig.service.aclose()
    assert [r for r in server.requests.all() if r.api.startswith("openai")] == []
    thread = ran.thread_of("hooks.echo")
    assert ran.texts(thread) == ["echo: route me"]
    assert ran.result.content == "echo: route me"


async def test_an_assistant_created_over_the_api_runs_for_its_owner_only(
    llm_rig: Rig, server: FakeModelServer
) -> None:
    from orchestrator.errors import NotFound

    package = {"name": "made over the API", "connector": "fake"}
    prompts = [{"role": "system", "content": "You answer in one word."}]
    await llm_rig.store.assistants.create(
        "api.oneword", owner="alice", package=package, prompts=prompts, sandbox=None
    )
    ran = await llm_rig.run("api.oneword", "hi there", session_id="chat-api")
    assert ran.result.status == "completed", ran.result.error
    assert ran.starts()[None].assistant_id == "api.oneword"
    [request] = [r for r in server.requests.all() if r.api == "openai-chat"]
    assert "You answer in one word." in json.dumps(request.body["messages"])
    with pytest.raises(NotFound):
        await llm_rig.service.start(llm_rig.turn("api.oneword", "hi", owner="bob"))
    # an update reaches the next turn
    await llm_rig.store.assistants.replace(
        "api.oneword",
        package=package,
        prompts=[{"role": "system", "content": "Now two words."}],
        sandbox=None,
    )
    await llm_rig.run("api.oneword", "again", session_id="chat-api-2")
    assert "Now two words." in json.dumps(server.requests.all()[-1].body["messages"])
    await llm_rig.service.aclose()
