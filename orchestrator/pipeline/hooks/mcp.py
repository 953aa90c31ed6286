"""`HookMcp`: `ctx.mcp`, the tools of the assistant's MCP servers from a Create or Next hook (Yao's
`ctx.mcp`), under the rules of LLM mode: only the servers of the package's `mcp.servers` (and a
Create hook's `mcp_servers` do not widen it), each narrowed to its `tools` allowlist, and stdio
servers (commands on the orchestrator host) only where `CAGE_ALLOW_HOST_MCP` allows them.

Each call connects to the server for that call and closes it again. MCP is imported on first use,
so a turn whose hooks never touch `ctx.mcp` loads none of it.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from orchestrator.dsl import Assistant, McpServerSpec
from orchestrator.errors import ConfigError, UsageError
from orchestrator.pipeline.hooks.sync import dual


class HookMcp:
    """`ctx.mcp`: `servers()`, `list_tools(server)`, `call_tool(server, tool, arguments)`."""

    def __init__(self, assistant: Assistant, *, allow_host_mcp: bool) -> None:
        self._assistant = assistant
        self._allow_host_mcp = allow_host_mcp

    def servers(self) -> list[str]:
        """The ids of the assistant's MCP servers."""
        return [spec.id for spec in self._assistant.mcp_servers]

    def _server(self, server_id: str) -> McpServerSpec:
        """
        Raises:
            UsageError: the assistant has no such server. ConfigError: a stdio server, not allowed here.
        """
        for spec in self._assistant.mcp_servers:
            if spec.id != server_id:
                continue
            if spec.transport == "stdio" and not self._allow_host_mcp:
                raise ConfigError(
                    f"ctx.mcp: MCP server {spec.id!r} uses transport stdio, which would run "
                    f"{spec.command!r} on the orchestrator host, outside any sandbox; use an http MCP "
                    "server, or let trusted apps do this with CAGE_ALLOW_HOST_MCP=1",
                    file=self._assistant.file("package.yao"),
                    key_path=f"mcp.servers.{spec.id}",
                )
            return spec
        known = ", ".join(self.servers()) or "none"
        raise UsageError(
            f"ctx.mcp: assistant {self._assistant.id!r} has no MCP server {server_id!r} "
            f"(mcp.servers: {known})"
        )

    @dual
    async def list_tools(self, server_id: str) -> list[dict[str, JsonValue]]:
        """The server's tools the assistant may use: `[{name, description, input_schema}]`.

        Raises:
            UsageError, ConfigError: see `_server`. ToolError: the server cannot be reached.
        """
        from orchestrator.llm.mcp import McpToolset  # lazy: see the module docstring

        spec = self._server(server_id)
        async with McpToolset.open([spec]) as toolset:
            (connection,) = toolset.connections
            allowed = set(spec.tools)
            return [
                {"name": t.name, "description": t.description or "", "input_schema": t.input_schema}
                for t in connection.tools
                if not allowed or t.name in allowed
            ]

    @dual
    async def call_tool(
        self, server_id: str, tool: str, arguments: dict[str, Any] | None = None
    ) -> dict[str, JsonValue]:
        """Call `tool` of the server: `{content, is_error}` (`content` the tool's text).

        Raises:
            UsageError: the tool is outside the server's allowlist (or see `_server`). ToolError:
            the server cannot be reached.
        """
        from orchestrator.llm.mcp import McpToolset

        spec = self._server(server_id)
        if spec.tools and tool not in spec.tools:
            allowed = ", ".join(spec.tools)
            raise UsageError(
                f"ctx.mcp: tool {tool!r} of {server_id!r} is not allowed for {self._assistant.id!r} "
                f"(mcp.servers tools: {allowed})"
            )
        async with McpToolset.open([spec]) as toolset:
            result = await toolset.connections[0].call(tool, dict(arguments or {}))
        return {"content": result.output, "is_error": result.is_error}
