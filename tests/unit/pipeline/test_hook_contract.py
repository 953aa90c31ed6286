"""Yao's hook contract through the real pipeline: the Create fields Cage does not act on are a
`hook/ignored` warning (never a failed turn), `max_completion_tokens` reaches the model, and a Next
hook's `data` and `metadata` reach the client as a `hook/next` event and the turn's result; `ctx.mcp`
lists and calls the assistant's MCP tools (a real streamable-HTTP server) within its allowlist."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import pytest
from anyio.abc import TaskGroup

from orchestrator.store import Store
from orchestrator.stream import Event, HookIgnored, HookNext, LifecycleEvent, validate_stream
from tests.fakes.assistants import write_assistant, write_connector
from tests.fakes.mcp_servers.http_server import HttpMcpServer
from tests.fakes.model_server import FakeModelServer
from tests.pipeline_rig import Rig
from tests.unit.sandbox.fakes import FakeBackend

KEY = "sk-fake-hook-contract-key-0042"
P = TypeVar("P")
PROMPTS = "- role: system\n  content: You are terse.\n"
YAO_CREATE = (
    "async def create(ctx, messages, options):\n"
    "    return {'max_completion_tokens': 77, 'search': {'web': True}, 'force_uses': True,\n"
    "            'audio': {'voice': 'alloy'}, 'theme': 'dark', 'route': '/chat/x'}\n"
    "async def next(ctx, payload, options):\n"
    "    return {'data': {'answer': payload['completion']['content']},\n"
    "            'metadata': {'ticket': 'T-7', 'score': 3}}\n"
)


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
    package = {"name": "yao hooks", "connector": "fake"}
    write_assistant(app_root, "contract.yao", package=package, prompts=PROMPTS, hooks=YAO_CREATE)
    return Rig.build(
        app_root, store, FakeBackend(), tasks=turn_tasks, data_dir=tmp_path / "d", environ={"K": KEY}
    )


def _props(ran_events: Sequence[Event], kind: type[P]) -> list[P]:
    return [e.props for e in ran_events if isinstance(e, LifecycleEvent) and isinstance(e.props, kind)]


async def test_yao_create_fields_are_honoured_or_warned_never_fatal(
    llm_rig: Rig, server: FakeModelServer
) -> None:
    ran = await llm_rig.run("contract.yao", "hello")
    await llm_rig.service.aclose()
    assert ran.result.status == "completed", ran.result.error
    [request] = [r for r in server.requests.all() if r.api == "openai-chat"]
    assert request.body.get("max_tokens") == 77  # max_completion_tokens is honoured
    [ignored] = _props(ran.events, HookIgnored)
    assert ignored.hook == "create" and ignored.assistant_id == "contract.yao"
    assert set(ignored.keys) == {"search", "force_uses", "audio", "theme", "route"}
    assert "theme:" in ignored.reason and "search pipeline" in ignored.reason
    assert validate_stream([e.model_dump(mode="json") for e in ran.events]) == []


async def test_next_data_and_metadata_reach_the_client(llm_rig: Rig) -> None:
    ran = await llm_rig.run("contract.yao", "hello")
    await llm_rig.service.aclose()
    [nxt] = _props(ran.events, HookNext)
    assert nxt.assistant_id == "contract.yao"
    assert nxt.data == {"answer": ran.result.content} and ran.result.content
    assert nxt.metadata == {"ticket": "T-7", "score": 3}
    assert ran.result.data == nxt.data and ran.result.metadata == nxt.metadata
    # the event is in the session's log, where a reconnecting client reads it
    logged = await llm_rig.store.events.after(ran.turn.session_id)
    assert [
        e.props.data for e in logged if isinstance(e, LifecycleEvent) and isinstance(e.props, HookNext)
    ] == [nxt.data]


async def test_a_next_hook_returning_nothing_adds_no_event(rig: Rig) -> None:
    ran = await rig.run("hooks.echo", "plain")
    assert _props(ran.events, HookNext) == [] and _props(ran.events, HookIgnored) == []


MCP_HOOKS = (
    "async def next(ctx, payload, options):\n"
    "    listed = await ctx.mcp.list_tools('calc')\n"
    "    added = await ctx.mcp.call_tool('calc', 'add', {'a': 2, 'b': 3})\n"
    "    try:\n"
    "        await ctx.mcp.call_tool('calc', 'fail', {})\n"
    "        refused = None\n"
    "    except Exception as exc:\n"
    "        refused = str(exc)\n"
    "    return {'data': {'servers': ctx.mcp.servers(), 'tools': sorted(t['name'] for t in listed),\n"
    "                     'added': added, 'refused': refused}}\n"
)
SYNC_MCP_HOOK = (
    "def next(ctx, payload, options):\n"
    "    return {'data': ctx.mcp.call_tool('calc', 'greet', {'name': 'sync'})}\n"
)


async def test_ctx_mcp_lists_and_calls_the_assistants_tools_within_its_allowlist(
    app_root: Path,
    store: Store,
    server: FakeModelServer,
    tmp_path: Path,
    turn_tasks: TaskGroup,
) -> None:
    write_connector(
        app_root, "fake", kind="openai", model="fake-model@text", host=server.url + "/v1", key_env="K"
    )
    state = tmp_path / "mcp-state"
    state.mkdir()
    with HttpMcpServer(state, token="mcp-hook-token-77") as mcp:
        (app_root / "mcps").mkdir()
        (app_root / "mcps" / "calc.mcp.yao").write_text(
            json.dumps({"transport": "http", "url": mcp.url, "authorization_token": "mcp-hook-token-77"})
        )
        package = {
            "name": "mcp hooks",
            "connector": "fake",
            "mcp": {"servers": [{"server_id": "calc", "tools": ["add", "greet"]}]},
        }
        write_assistant(app_root, "contract.mcp", package=package, prompts=PROMPTS, hooks=MCP_HOOKS)
        write_assistant(app_root, "contract.sync", package=package, prompts=PROMPTS, hooks=SYNC_MCP_HOOK)
        rig = Rig.build(
            app_root, store, FakeBackend(), tasks=turn_tasks, data_dir=tmp_path / "d", environ={"K": KEY}
        )
        try:
            ran = await rig.run("contract.mcp", "hello")
            sync = await rig.run("contract.sync", "hello")
        finally:
            await rig.service.aclose()
    assert ran.result.status == "completed", ran.result.error
    data = ran.result.data
    assert isinstance(data, dict)
    assert data["servers"] == ["calc"]
    assert data["tools"] == ["add", "greet"]  # the package's allowlist narrows what a hook sees
    assert data["added"] == {"content": "5", "is_error": False}
    assert (
        isinstance(data["refused"], str) and "'fail'" in data["refused"] and "not allowed" in data["refused"]
    )
    assert sync.result.status == "completed", sync.result.error
    assert sync.result.data == {"content": "hello, sync", "is_error": False}


TAKEOVER_HOOKS = (
    "async def next(ctx, payload, options):\n"
    "    results = payload['tool_results']\n"
    "    if results and ctx.metadata.get('again'):\n"
    "        told = 'The tool said: ' + results[0]['output']\n"
    "        return {'delegate': {'agent_id': ctx.assistant_id, 'options': {'connector': 'final'},\n"
    "                'messages': [*payload['messages'], {'role': 'user', 'content': told}]}}\n"
    "    return {'data': {'results': results, 'answer': payload['completion']['content']}}\n"
)


@pytest.fixture
def takeover_rig(
    app_root: Path, store: Store, server: FakeModelServer, tmp_path: Path, turn_tasks: TaskGroup
) -> Iterator[Rig]:
    server.add_scenario("takeover", [{"tool": "calc__add", "args": {"a": 2, "b": 3}}, {"text": "2 + 3 = 5."}])
    server.add_scenario("final", [{"text": "The sum is 5."}])
    for conn, model in (("tools", "fake-model@takeover"), ("final", "fake-model@final")):
        write_connector(app_root, conn, kind="openai", model=model, host=server.url + "/v1", key_env="K")
    state = tmp_path / "mcp-state"
    state.mkdir()
    with HttpMcpServer(state) as mcp:
        (app_root / "mcps").mkdir()
        (app_root / "mcps" / "calc.mcp.yao").write_text(json.dumps({"transport": "http", "url": mcp.url}))
        package = {"name": "takeover", "connector": "tools", "mcp": {"servers": ["calc"]}}
        write_assistant(app_root, "contract.takeover", package=package, prompts=PROMPTS, hooks=TAKEOVER_HOOKS)
        write_assistant(app_root, "contract.loop", package=package, prompts=PROMPTS)
        yield Rig.build(
            app_root, store, FakeBackend(), tasks=turn_tasks, data_dir=tmp_path / "d", environ={"K": KEY}
        )


def _model_calls(server: FakeModelServer, scenario: str) -> int:
    return len([r for r in server.requests.all() if r.api == "openai-chat" and r.scenario == scenario])


async def test_a_next_hook_takes_over_the_tool_results(takeover_rig: Rig, server: FakeModelServer) -> None:
    ran = await takeover_rig.run("contract.takeover", "what is 2 + 3?")
    assert ran.result.status == "completed", ran.result.error
    data = ran.result.data
    assert isinstance(data, dict)
    [result] = data["results"]
    assert (result["name"], result["output"], result["is_error"]) == ("calc__add", "5", False)
    assert result["arguments"] == {"a": 2, "b": 3}
    assert _model_calls(server, "takeover") == 1  # the tool result went to Next, not back to the model
    # without a Next hook the same script is a loop: the result goes back to the model
    plain = await takeover_rig.run("contract.loop", "what is 2 + 3?")
    await takeover_rig.service.aclose()
    assert plain.result.content == "2 + 3 = 5."
    assert _model_calls(server, "takeover") == 3


async def test_next_gives_the_model_another_round_by_delegating(
    takeover_rig: Rig, server: FakeModelServer
) -> None:
    ran = await takeover_rig.run("contract.takeover", "what is 2 + 3?", metadata={"again": True})
    await takeover_rig.service.aclose()
    assert ran.result.status == "completed", ran.result.error
    assert ran.result.data == {"results": [], "answer": "The sum is 5."}
    assert _model_calls(server, "takeover") == 1 and _model_calls(server, "final") == 1
    [final] = [r for r in server.requests.all() if r.scenario == "final"]
    assert "The tool said: 5" in json.dumps(final.body["messages"])


async def test_which_hooks_an_assistant_defines(app_root: Path) -> None:
    from orchestrator.dsl import AppLoader
    from orchestrator.pipeline.hooks.modules import HookModules

    write_assistant(app_root, "contract.py_next", hooks="def next(ctx, payload, options):\n    return None\n")
    ts = write_assistant(app_root, "contract.ts_next", hooks=None)
    (ts / "src").mkdir()
    (ts / "src" / "index.ts").write_text("export function Next(ctx: any, payload: any) {\n  return null\n}\n")
    ts_create = write_assistant(app_root, "contract.ts_create", hooks=None)
    (ts_create / "src").mkdir()
    (ts_create / "src" / "index.ts").write_text("export const Create = async (ctx: any) => null\n")
    loader = AppLoader(app_root)
    hooks = HookModules()
    py, tsn, tsc = (loader.get(f"contract.{n}") for n in ("py_next", "ts_next", "ts_create"))
    assert await hooks.defines(py, "next") and not await hooks.defines(py, "create")
    assert await hooks.defines(tsn, "next") and not await hooks.defines(tsn, "create")
    assert await hooks.defines(tsc, "create") and not await hooks.defines(tsc, "next")
