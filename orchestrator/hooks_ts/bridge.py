"""The orchestrator side of a TypeScript hook's `ctx`: one async handler per bridged method.

Method names are the wire names of docs/hooks-ts.md. Each handler calls the same `HookContext`
a Python hook gets, so both languages see one behaviour (memory spaces, agent calls with forked
history, the sandbox confined to the workspace).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog

from orchestrator.hooks_ts.runtime import Bundler, Handler

if TYPE_CHECKING:
    from orchestrator.dsl import Assistant

HookContext = Any
"""`orchestrator.pipeline.hooks.context.HookContext`, not imported: `orchestrator.llm` (process MCP
servers) uses this package and must not depend on the pipeline."""


log = structlog.get_logger(__name__)
SENDABLE = frozenset({"text", "thinking", "error", "loading", "execute"})
"""Message types Cage's protocol has; `image` becomes markdown, other Yao types are dropped."""


def _content(message: object) -> str:
    if isinstance(message, str):
        return message
    if isinstance(message, Mapping):
        props = message.get("props")
        if isinstance(props, Mapping):
            return str(props.get("content", props.get("text", "")))
    return ""


def context_fields(ctx: HookContext) -> dict[str, Any]:
    """The plain fields of Yao's `ctx` (ids, locale, metadata)."""
    return {
        "assistant_id": ctx.assistant_id,
        "chat_id": ctx.chat_id,
        "request_id": ctx.request_id,
        "locale": ctx.locale or "",
        "metadata": dict(ctx.metadata),
        "authorized": {"user_id": ctx.owner},
    }


def sandbox_info(ctx: HookContext) -> dict[str, str] | None:
    if ctx.sandbox is None:
        return None
    return {"id": ctx.assistant_id, "workdir": ctx.sandbox.work_dir}


def script_handler(assistant: Assistant, bundler: Bundler) -> Handler:
    async def script(script_id: str) -> str:
        path = assistant.scripts.get(str(script_id).lower())
        if path is None:
            raise LookupError(f"assistant {assistant.id} has no script src/{script_id}.ts")
        return bundler.bundle(path)

    return script


def handlers(ctx: HookContext, assistant: Assistant, bundler: Bundler) -> dict[str, Handler]:
    """Every bridged method of `ctx` for one hook call."""
    streams: dict[str, str] = {}

    async def send(message: object) -> None:
        kind = message.get("type", "text") if isinstance(message, Mapping) else "text"
        if kind in SENDABLE:
            await ctx.send(message)
            return
        props = message.get("props") if isinstance(message, Mapping) else None
        if kind == "image" and isinstance(props, Mapping) and props.get("url"):
            # as Yao's OpenAI writer renders it
            await ctx.send(f"![{props.get('alt', '')}]({props['url']})")
            return
        # Yao CUI widgets (action, custom types) have no place in Cage's protocol
        log.info("hooks_ts.message_dropped", assistant=assistant.id, type=str(kind))

    async def send_stream(message: object) -> str:
        """Open a message that `Append`/`Replace` extend and `End` closes (text, or a loading line)."""
        message_id = f"M{len(streams) + 1}"
        kind = message.get("type", "text") if isinstance(message, Mapping) else "text"
        streams[message_id] = str(kind)
        if kind == "loading":
            await ctx.send(message)
        else:
            await ctx.stream_text(_content(message))
        return message_id

    async def append(message_id: str, content: object) -> None:
        await ctx.stream_text(content if isinstance(content, str) else _content(content))

    async def replace(message_id: str, message: object) -> None:
        if streams.get(message_id) == "loading":
            streams[message_id] = "text"
            await ctx.send({"type": "loading", "props": {"done": True}})
        await ctx.stream_text(_content(message))

    async def end(message_id: str) -> None:
        if streams.pop(message_id, None) == "loading":
            await ctx.send({"type": "loading", "props": {"done": True}})
        await ctx.end_stream()

    def space(name: str) -> Any:
        if name not in ("user", "team", "chat", "context"):
            raise ValueError(f"unknown memory space {name!r} (user, team, chat, context)")
        return getattr(ctx.memory, name)

    async def memory_get(name: str, key: str) -> Any:
        return await space(name).get(key)

    async def memory_set(name: str, key: str, value: Any, ttl: float | None = None) -> None:
        await space(name).set(key, value, ttl)

    async def memory_del(name: str, key: str) -> bool:
        return bool(await space(name).delete(key))

    async def memory_has(name: str, key: str) -> bool:
        return bool(await space(name).has(key))

    async def memory_keys(name: str, prefix: str = "") -> list[str]:
        return list(await space(name).keys(prefix))

    async def memory_clear(name: str) -> int:
        return int(await space(name).clear())

    async def agent_call(agent_id: str, messages: object, options: Mapping[str, Any] | None = None) -> Any:
        return await ctx.agent.call(agent_id, messages, dict(options or {}))

    async def agent_all(calls: list[Mapping[str, Any]]) -> Any:
        return await ctx.agent.all(calls)

    async def agent_any(calls: list[Mapping[str, Any]]) -> Any:
        return await ctx.agent.any(calls)

    async def agent_race(calls: list[Mapping[str, Any]]) -> Any:
        return await ctx.agent.race(calls)

    def box() -> Any:
        if ctx.sandbox is None:
            raise RuntimeError("this assistant has no sandbox")
        return ctx.sandbox

    async def sandbox_exec(command: str | list[str]) -> Any:
        return await box().exec(command)

    async def read_file(path: str) -> str:
        return str(await box().read_file(path))

    async def write_file(path: str, content: str) -> None:
        await box().write_file(path, content)

    def server(server_id: str) -> Any:
        for spec in assistant.mcp_servers:
            if spec.id == server_id:
                if spec.transport == "stdio":
                    raise PermissionError(
                        f"MCP server {server_id!r} is stdio (a host command); TypeScript "
                        "hooks use http, sse and process servers only"
                    )
                return spec
        raise LookupError(f"assistant {assistant.id} has no MCP server {server_id!r} (mcp.servers)")

    async def mcp_list_tools(server_id: str, cursor: str = "") -> dict[str, Any]:
        from orchestrator.llm.mcp import McpToolset  # lazy: orchestrator.llm imports this package

        async with McpToolset.open([server(server_id)]) as toolset:
            (connection,) = toolset.connections
            allowed = set(connection.spec.tools)
            return {
                "tools": [
                    {"name": t.name, "description": t.description or "", "inputSchema": t.input_schema}
                    for t in connection.tools
                    if not allowed or t.name in allowed
                ]
            }

    async def mcp_call_tool(server_id: str, tool: str, arguments: Mapping[str, Any] | None = None) -> Any:
        from orchestrator.llm.mcp import McpToolset

        spec = server(server_id)
        if spec.tools and tool not in spec.tools:
            raise PermissionError(f"tool {tool!r} of {server_id!r} is not allowed for {assistant.id}")
        async with McpToolset.open([spec]) as toolset:
            result = await toolset.connections[0].call(tool, dict(arguments or {}))
        return {"content": [{"type": "text", "text": result.output}], "isError": result.is_error}

    return {
        "mcp.list_tools": mcp_list_tools,
        "mcp.call_tool": mcp_call_tool,
        "send": send,
        "send_stream": send_stream,
        "append": append,
        "replace": replace,
        "end": end,
        "memory.get": memory_get,
        "memory.set": memory_set,
        "memory.del": memory_del,
        "memory.has": memory_has,
        "memory.keys": memory_keys,
        "memory.clear": memory_clear,
        "agent.call": agent_call,
        "agent.all": agent_all,
        "agent.any": agent_any,
        "agent.race": agent_race,
        "sandbox.exec": sandbox_exec,
        "sandbox.read_file": read_file,
        "sandbox.write_file": write_file,
        "script": script_handler(assistant, bundler),
    }
