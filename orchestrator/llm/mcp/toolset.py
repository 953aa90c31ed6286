"""`McpToolset`: the MCP servers of one turn, connected together and closed together.

Connections are opened once per turn (not pooled): a turn's servers start concurrently, the
turn's tools are listed from them, and every server is closed when the turn leaves the `async
with` — normally, on error and on cancellation alike. Pooling per assistant would save a process
start per turn but keep user-specific state and secrets alive between turns; that can come later
behind the same interface.

```python
async with McpToolset.open(assistant.mcp_servers) as toolset:
    toolset.tools    # McpTool per allowed tool, named <server>__<tool>
```
A server that cannot be reached fails the whole `open` with `ToolError` (a turn with part of
its tools missing would mislead the model); the error names the server, never its secrets.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import anyio
import structlog

from orchestrator.dsl import McpServerSpec
from orchestrator.errors import ToolError
from orchestrator.llm.mcp.connection import McpConnection, StdioOpener, host_stdio
from orchestrator.llm.mcp.tool import McpTool, tool_name

log = structlog.get_logger(__name__)


class McpToolset:
    """The connected servers of a turn and the tools the assistant may use on them."""

    def __init__(self, connections: Sequence[McpConnection]) -> None:
        self.connections = tuple(connections)
        self.tools = tuple(_allowed_tools(self.connections))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)

    @property
    def call_timeout(self) -> float:
        """The longest per-call timeout of the servers (0 when there are none)."""
        return max((c.timeout for c in self.connections), default=0.0)

    @classmethod
    @asynccontextmanager
    async def open(
        cls, specs: Sequence[McpServerSpec], *, stdio: StdioOpener = host_stdio
    ) -> AsyncIterator[McpToolset]:
        """Connect to every server in `specs` (concurrently); close them all on the way out.
        `stdio` starts the stdio servers (default: on this host).

        Raises:
            ToolError: a server could not be connected (`tool` is `mcp:<server id>`).
        """
        _check_unique(specs)
        connections = [McpConnection(spec, stdio=stdio) for spec in specs]
        try:
            async with anyio.create_task_group() as tg:
                for connection in connections:
                    tg.start_soon(connection.run, name=f"mcp:{connection.server_id}")
                try:
                    await _wait_all(connections)
                    failed = [c for c in connections if not c.connected]
                    if failed:
                        first = failed[0]
                        why = first.error or "unknown error"
                        raise ToolError(f"mcp:{first.server_id}", f"cannot connect: {why}")
                    toolset = cls(connections)
                    servers = [c.server_id for c in connections]
                    log.info("mcp.connected", servers=servers, tools=len(toolset.tools))
                    yield toolset
                finally:
                    # Closing is shielded inside `close()`: it completes even when the turn is cancelled.
                    for connection in connections:
                        tg.start_soon(connection.close)
        except BaseExceptionGroup as group:
            # The connection tasks never raise, so a group holds the body's own exception: give it
            # back unwrapped, as if there were no task group here.
            if len(group.exceptions) != 1:
                raise
            inner = group.exceptions[0]
            raise inner from inner.__cause__


async def _wait_all(connections: Sequence[McpConnection]) -> None:
    async with anyio.create_task_group() as tg:
        for connection in connections:
            tg.start_soon(connection.wait_ready)


def _check_unique(specs: Sequence[McpServerSpec]) -> None:
    seen: set[str] = set()
    for spec in specs:
        if spec.id in seen:
            raise ToolError(f"mcp:{spec.id}", "the same MCP server is configured twice for this turn")
        seen.add(spec.id)


def _allowed_tools(connections: Sequence[McpConnection]) -> list[McpTool]:
    tools: list[McpTool] = []
    taken: set[str] = set()
    for connection in connections:
        allow = set(connection.spec.tools)
        listed = {t.name for t in connection.tools}
        missing = sorted(allow - listed)
        if missing:
            log.warning("mcp.allowlisted_tools_missing", server=connection.server_id, tools=missing)
        for remote in connection.tools:
            if allow and remote.name not in allow:
                continue
            name = tool_name(connection.server_id, remote.name)
            if name in taken:  # two ids that differ only in unsafe characters
                name = tool_name(connection.server_id + f"-{len(taken)}", remote.name)
            taken.add(name)
            tools.append(McpTool(connection, remote, name=name))
    return tools
