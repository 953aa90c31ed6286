"""Yao's `transport: "process"` MCP servers, served in-process.

A process server maps each tool to a Yao process (`tools: {name: process}`) with the input schema
from its `mapping/.../schemes/<tool>.in.yao`. Cage runs the processes an assistant's own scripts
define (`agents.<id>.<script>.<Function>`, resolved at load time to `src/<script>.ts`) in the
locked-down TypeScript runtime, passing the tool's arguments as the one parameter (Yao's default
when the schema has no `x-process-args`). Any other process (Yao's `models.*`, `scripts.*`, ...)
has no equivalent: calling it is an error result naming the process.

`ProcessClient` answers the two calls `McpConnection` makes of an MCP SDK client.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mcp.types as mt

from orchestrator.dsl import McpServerSpec, ProcessTool
from orchestrator.hooks_ts import TsRuntime, TsRuntimeError
from orchestrator.hooks_ts.runtime import Handler

_RUNTIME: TsRuntime | None = None


def _runtime() -> TsRuntime:
    global _RUNTIME
    if _RUNTIME is None:
        _RUNTIME = TsRuntime()
    return _RUNTIME


def _src_dir(script: Path) -> Path:
    for parent in script.parents:
        if parent.name == "src":
            return parent
    return script.parent


class ProcessClient:
    """The tools of one process server; `list_tools` and `call_tool` shaped like the SDK client's."""

    def __init__(self, spec: McpServerSpec, runtime: TsRuntime | None = None) -> None:
        self.spec = spec
        self._tools = {t.name: t for t in spec.process_tools}
        self._runtime = runtime

    async def list_tools(self, cursor: str | None = None) -> mt.ListToolsResult:
        tools = [
            mt.Tool(
                name=t.name,
                description=t.description or f"{t.name} ({t.process})",
                input_schema=t.input_schema,
            )
            for t in self._tools.values()
        ]
        return mt.ListToolsResult(tools=tools)

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], read_timeout_seconds: float | None = None
    ) -> mt.CallToolResult:
        tool = self._tools.get(name)
        if tool is None:
            return _error(f"no tool {name!r} on MCP server {self.spec.id!r}")
        if tool.script is None:
            return _error(
                f"tool {name!r} calls process {tool.process!r}, which has no equivalent in Cage "
                "(it runs only assistant scripts, agents.<assistant>.<script>.<Function>)"
            )
        runtime = self._runtime or _runtime()
        try:
            value = await runtime.run(
                code=runtime.bundler.bundle(tool.script),
                filename=tool.script.name,
                function=tool.function,
                args=[dict(arguments)],
                assistant_id=tool.assistant_id,
                ctx=None,
                handlers={"script": self._sibling(tool)},
            )
        except TsRuntimeError as exc:
            return _error(f"process {tool.process!r} failed: {exc}")
        if not value.defined:
            return _error(f"process {tool.process!r}: {tool.script.name} has no function {tool.function!r}")
        text = value.value if isinstance(value.value, str) else json.dumps(value.value, ensure_ascii=False)
        return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=False)

    def _sibling(self, tool: ProcessTool) -> Handler:
        assert tool.script is not None
        src = _src_dir(tool.script)
        runtime = self._runtime or _runtime()

        async def script(script_id: str) -> str:
            path = src.joinpath(*str(script_id).split(".")).with_suffix(".ts")
            if not path.is_file() or not path.resolve().is_relative_to(src.resolve()):
                raise LookupError(f"no script src/{script_id}.ts")
            return runtime.bundler.bundle(path)

        return script


def _error(message: str) -> mt.CallToolResult:
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=message)], is_error=True)
