"""MCP tool allowlists are enforced by the real agent CLIs: a server's tool left out of
`mcp.servers[].tools` is not offered to the model, and when the model calls it anyway it never
reaches the server (the stdlib `bare` server logs every call it gets, inside the box)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import SecretStr

from orchestrator.dsl import ConnectorSpec, ConnectorType, McpServerSpec
from orchestrator.pipeline.modes.bridge import run_runner_turn
from orchestrator.sandbox.backend import CreateSpec, ExecSpec, FileEntry, VolumeMount
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.sandbox.limits import MAIN_COMMAND
from orchestrator.settings import Settings
from orchestrator.stream import CountingIds, Event, TurnBuilder
from runners.base import TurnRequest
from runners.registry import adapter_for
from tests.fakes.mcp_servers import bare
from tests.fakes.model_server import FakeModelServer
from tests.integration.runners.test_runner_permissions import HOST_CA, BoxSandbox, box, run_turn

pytestmark = pytest.mark.slow
__all__ = ["box"]
BARE_SOURCE = Path(bare.__file__).read_bytes()
TOOL_NAMES = {"opencode": ("bare_echo", "bare_secret"), "codex": ("mcp__bare__echo", "mcp__bare__secret")}


def names(node: object) -> set[str]:
    """Every `name` in a request's tool list, at any depth."""
    if isinstance(node, list):
        return set().union(*(names(item) for item in node)) if node else set()
    if isinstance(node, dict):
        found = {node["name"]} if isinstance(node.get("name"), str) else set()
        return found.union(*(names(value) for value in node.values()))
    return set()


async def _calls(sandbox: BoxSandbox) -> list[str]:
    spec = ExecSpec(argv=("cat", "/workspace/mcp-state/calls.log"), user="sandbox")
    async with await sandbox.exec(spec) as handle:
        lines: list[str] = []
        async for item in handle:
            if isinstance(item, bytes):
                lines.append(item.decode())
        await handle.wait()
    return [line.split()[0] for line in lines if line.strip()]


@pytest.fixture(scope="module")
def model(model_server: FakeModelServer) -> FakeModelServer:
    for runner, (echo, secret) in TOOL_NAMES.items():
        model_server.add_scenario(
            f"allow-{runner}",
            [
                {"tool": echo, "args": {"text": "listed"}},
                {"tool": secret, "args": {}},
                {"text": "finished"},
            ],
        )
    return model_server


async def test_an_unlisted_tool_is_neither_offered_nor_run(
    box: tuple[str, BoxSandbox], model: FakeModelServer
) -> None:
    runner, sandbox = box
    script = FileEntry(path="mcp/bare.py", content=BARE_SOURCE, uid=1000, gid=1000)
    await sandbox.put_files("/workspace", [script])
    server = McpServerSpec(
        id="bare",
        transport="stdio",
        command="python3",
        args=("/workspace/mcp/bare.py", "/workspace/mcp-state"),
        tools=("echo",),
    )
    scenario = f"allow-{runner}"
    # no gate: the turn runs with the CLI's own permissions, as without `permissions` in sandbox.yao
    turn = await run_turn(runner, sandbox, model, scenario, None, mcp=(server,), model="fake-model")  # type: ignore[arg-type]
    assert turn.result.status == "completed", turn.result
    first = model.requests.for_scenario(scenario)[0].body
    offered = names(first.get("tools", []))  # codex nests a server's tools under its namespace
    assert any(n.endswith("echo") for n in offered), sorted(offered)
    assert not any(n.endswith("secret") for n in offered), sorted(offered)
    assert await _calls(sandbox) == ["echo"]  # the unlisted tool never reached the server
    results = json.dumps(model.requests.for_scenario(scenario)[-1].tool_results())
    assert bare.SECRET_ANSWER not in results


@pytest.fixture
async def claude_box(
    tmp_path: Path, test_run_labels: dict[str, str], docker_engine: Any
) -> AsyncIterator[BoxSandbox]:
    settings = Settings(data_dir=tmp_path / "data", extra_ca_certs=HOST_CA)
    image = await DockerImageBuilder(settings).ensure("claude")
    backend = DockerBackend(settings)
    name = f"cage-it-allow-claude-{uuid.uuid4().hex[:8]}"
    await backend.ensure_volume(f"{name}-ws", test_run_labels)
    ref = await backend.create(
        CreateSpec(
            image=image.tag,
            name=name,
            command=MAIN_COMMAND,
            labels=test_run_labels,
            user="sandbox",
            workdir="/workspace",
            mounts=(VolumeMount(source=f"{name}-ws", target="/workspace", owner=(1000, 1000)),),
            cap_drop=("ALL",),
            security_opt=("no-new-privileges:true",),
            network="bridge",
            extra_hosts={"host.docker.internal": "host-gateway"},
        )
    )
    await backend.start(ref)
    yield BoxSandbox(backend, ref)
    await backend.remove(ref, force=True)
    await backend.remove_volume(f"{name}-ws")


async def test_claude_cannot_call_an_unlisted_tool_even_bypassing_permissions(
    claude_box: BoxSandbox, model: FakeModelServer
) -> None:
    sandbox = claude_box
    await sandbox.put_files(
        "/workspace", [FileEntry(path="mcp/bare.py", content=BARE_SOURCE, uid=1000, gid=1000)]
    )
    server = McpServerSpec(
        id="bare",
        transport="stdio",
        command="python3",
        args=("/workspace/mcp/bare.py", "/workspace/mcp-state"),
        tools=("echo",),
    )
    scenario = "allow-claude"
    model.add_scenario(
        scenario,
        [
            {"tool": "mcp__bare__echo", "args": {"text": "listed"}},
            {"tool": "mcp__bare__secret", "args": {}},
            {"text": "finished"},
        ],
    )
    connector = ConnectorSpec(
        id="fake",
        label="fake",
        type=ConnectorType.ANTHROPIC,
        model=f"claude-sonnet-4-5@{scenario}",
        base_url=model.url_for_containers,
        key=SecretStr("sk-ant-fake-allow-123456"),
        max_retries=1,
    )
    turn = TurnRequest(
        assistant_id="e2e.claude",
        owner="alice",
        session_id=f"chat-{uuid.uuid4().hex[:8]}",
        turn_id=f"turn-{uuid.uuid4().hex[:8]}",
        prompt="please do the task",
        connector=connector,
        mcp_servers=(server,),
        lifecycle="session",
    )  # runner.options default: bypassPermissions
    builder = TurnBuilder(CountingIds(), runner="claude")
    events: list[Event] = []

    async def emit(batch: Sequence[Event]) -> None:
        events.extend(batch)

    with anyio.fail_after(300):
        result = await run_runner_turn(adapter_for("claude"), turn, sandbox, builder, emit)
    assert result.status == "completed", result
    assert await _calls(sandbox) == ["echo"]  # the unlisted tool never reached the server
    results = json.dumps(model.requests.for_scenario(scenario)[-1].tool_results())
    assert bare.SECRET_ANSWER not in results and "allowlist" in results
