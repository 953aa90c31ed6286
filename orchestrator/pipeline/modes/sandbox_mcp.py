"""The yaocode runner's stdio MCP servers, run inside the assistant's sandbox.

The loop runs in the orchestrator, but a stdio server is code of the assistant: it must never
run on the host (security stance). `sandbox_stdio` gives `McpToolset.open` an opener that starts
the server through the sandbox exec (as the sandbox user, in the work dir, with the lease's env
plus the server's own), and carries the newline-delimited JSON-RPC messages over the exec's
stdin and stdout. The server's stderr lands in the connection's stderr file when it ends, so a
failed start is explained as for a host server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TextIO, cast

import anyio
import mcp_types as types
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client import Transport
from mcp.shared.message import SessionMessage

from orchestrator.dsl import McpServerSpec
from orchestrator.errors import StreamLimitError
from orchestrator.llm.mcp import StdioOpener
from orchestrator.redaction import redact
from orchestrator.sandbox.backend import ExecHandle, ExecSpec
from orchestrator.sandbox.manager import SandboxLease, SandboxManager

log = structlog.get_logger(__name__)

_Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]
GRACE_SECONDS = 2.0
"""Between SIGTERM and SIGKILL when the turn closes a server that is still running."""


def sandbox_stdio(manager: SandboxManager, lease: SandboxLease) -> StdioOpener:
    """An opener that runs each stdio server in `lease`'s sandbox."""

    def opener(spec: McpServerSpec, errlog: TextIO) -> Transport:
        return cast(Transport, _in_sandbox(manager, lease, spec, errlog))

    return opener


@asynccontextmanager
async def _in_sandbox(
    manager: SandboxManager, lease: SandboxLease, spec: McpServerSpec, errlog: TextIO
) -> AsyncIterator[_Streams]:
    exec_spec = ExecSpec(
        argv=(spec.command, *spec.args), env=dict(spec.env), stdin="pipe", grace_seconds=GRACE_SECONDS
    )
    handle = await manager.exec(lease, exec_spec)
    log.info("mcp.sandbox_server_started", server=spec.id, sandbox=lease.identity.name)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_read, handle, read_writer, spec.id)
            tg.start_soon(_write, handle, write_reader)
            try:
                yield read_stream, write_stream
            finally:
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await handle.aclose()
            tail = handle.stderr.decode("utf-8", errors="replace")
            if tail:
                errlog.write(tail)
            for stream in (read_stream, write_stream, read_writer, write_reader):
                await stream.aclose()


async def _read(
    handle: ExecHandle, out: MemoryObjectSendStream[SessionMessage | Exception], server: str
) -> None:
    """Server stdout lines -> session messages; ends (closing `out`) when the server exits."""
    async with out:
        try:
            async for item in handle:
                if isinstance(item, StreamLimitError):
                    await out.send(ValueError(f"MCP server {server!r} wrote a line over the size limit"))
                    continue
                if not item.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(item, by_name=False)
                except ValueError as exc:
                    log.warning("mcp.sandbox_bad_line", server=server, error=redact(str(exc))[:200])
                    await out.send(exc)
                    continue
                await out.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return


async def _write(handle: ExecHandle, messages: MemoryObjectReceiveStream[SessionMessage]) -> None:
    """Session messages -> the server's stdin, one JSON line each."""
    async with messages:
        try:
            async for message in messages:
                line = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await handle.write_stdin((line + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            return
