"""Yao's `transport: "process"` MCP servers: a tool mapped to an assistant script runs it (the
dev app's robot.host and its own mcps/tools.mcp.yao -> src/tools.ts ConfirmTask); a tool mapped
to a Yao process Cage does not have fails with an error naming the process."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from orchestrator.dsl import AppLoader
from orchestrator.llm.mcp.process import ProcessClient
from tests.fakes.model_server import FakeModelServer
from tests.integration.yao.conftest import needs_node
from tests.pipeline_rig import Rig
from tests.unit.dsl.test_yao_layout import DEV_APP, app_environ

pytestmark = [needs_node]
TOOL = "agents_robot_host_tools__confirm_task"


async def test_a_process_tool_runs_the_assistant_script_in_a_turn(
    yao_rig: Rig, yao_model_server: FakeModelServer
) -> None:
    yao_model_server.add_scenario(
        "confirm",
        [
            {"parts": [{"tool": TOOL, "args": {"goals": "ship the release"}}]},
            {"parts": [{"text": "Task confirmed."}]},
        ],
    )
    conn = yao_rig.root / "connectors" / "moonshot" / "kimi-k2_5-code.conn.yao"
    spec = json.loads(conn.read_text())
    spec["options"]["model"] = "claude-sonnet-4-5@confirm"
    conn.write_text(json.dumps(spec))
    before = len(yao_model_server.requests)
    ran = await yao_rig.run("robot.host", "I want to ship the release")
    assert ran.result.status == "completed", ran.result.error
    requests = yao_model_server.requests.all()[before:]
    assert TOOL in json.dumps(requests[0].body["tools"])
    # as in Yao, an assistant with a Next hook gets one model round: the tool's result goes to Next
    # (robot.host's returns null, so the turn ends with the model's tool call), not back to the model
    assert len(requests) == 1
    streamed = json.dumps([e.model_dump(mode="json") for e in ran.events])
    assert '\\"confirmed\\": true' in streamed and "ship the release" in streamed  # ConfirmTask's return


def test_a_tool_without_equivalent_is_an_error_naming_the_process() -> None:
    loader = AppLoader(DEV_APP, environ=app_environ(DEV_APP))
    echo = loader.mcp_server("echo")
    assert echo.transport == "process"

    async def call() -> tuple[bool, str]:
        client = ProcessClient(echo)
        listed = await client.list_tools()
        assert {t.name for t in listed.tools} == {"ping", "status", "echo"}
        result = await client.call_tool("ping", {"count": 1})
        block = result.content[0]
        return bool(result.is_error), getattr(block, "text", "")

    is_error, text = anyio.run(call)
    assert is_error
    assert "process 'scripts.tests.mcp.Ping', which has no equivalent in Cage" in text


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


async def test_a_hook_calls_its_mcp_tools_through_ctx_mcp(yao_rig: Rig) -> None:
    _write(
        yao_rig.root / "assistants" / "tests" / "mcphook",
        {
            "package.yao": '{"name": "MCP from a hook", "connector": "gpt-4o",'
            ' "mcp": {"servers": [{"server_id": "agents.tests.mcphook.calc"}]}}',
            "mcps/calc.mcp.yao": '{"label": "Calc", "transport": "process",'
            ' "tools": {"double": "agents.tests.mcphook.calc.Double"}}',
            "mcps/mapping/calc/schemes/double.in.yao": '{"type": "object", "description": "Double n",'
            ' "properties": {"n": {"type": "number"}}}',
            "src/calc.ts": "export function Double(args: { n: number }) { return { doubled: args.n * 2 }; }\n",
            "src/index.ts": (
                "function Create(ctx: any, messages: any[]) {\n"
                '  const tools = ctx.mcp.ListTools("agents.tests.mcphook.calc");\n'
                '  const out = ctx.mcp.CallTool("agents.tests.mcphook.calc", "double", { n: 21 });\n'
                '  ctx.Send({ type: "text", props: { content: `${tools.tools[0].name}: ${out.content[0].text}` } });\n'
                "  return { messages };\n"
                "}\n"
            ),
        },
    )
    ran = await yao_rig.run("tests.mcphook", "go")
    assert ran.result.status == "completed", ran.result.error
    assert ran.texts()[0] == 'double: {"doubled": 42}'  # then the model's answer
