"""`McpConnection`: one MCP server for one turn, over stdio, streamable HTTP or SSE.

The connection lives in a task of its own (`run`), so the SDK's transport tasks and their
failures stay there: a server that dies mid-turn ends that task, records why, and later calls
fail as retryable transport errors, while the turn carries on. `close()` ends it; the SDK bounds
the shutdown of a stdio server (stdin closed, then SIGTERM, then SIGKILL, a few seconds each).

Timeouts come from `McpServerSpec.timeout` (default 60 s): each tool call, and the connect
handshake plus the tool listing (given at least 20 s, so that a tight per-call limit does not
stop a slow-starting server from being used at all). A stdio server's stderr goes to a temporary
file whose tail (secrets masked) explains a failed start.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import IO, TextIO, cast

import anyio
import anyio.to_thread
import httpx2
import mcp.types as mt
import structlog
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client import Transport
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import JsonValue, ValidationError

from orchestrator.dsl import McpServerSpec
from orchestrator.errors import STDERR_TAIL
from orchestrator.llm.mcp.content import result_text
from orchestrator.llm.mcp.process import ProcessClient
from orchestrator.llm.mcp.retries import failure
from orchestrator.llm.tools.base import ToolResult
from orchestrator.redaction import redact, register_secret

log = structlog.get_logger(__name__)

DEFAULT_TIMEOUT = 60.0
"""Seconds for connecting (handshake and tool listing) and for each tool call, unless the spec says."""
MIN_CONNECT_TIMEOUT = 20.0
"""Connecting gets the spec's timeout, but never less than this."""
SSE_READ_TIMEOUT = 300.0
"""How long an HTTP event stream may stay silent (servers hold it open between messages)."""
_MAX_PAGES = 50
_NOT_RETRYABLE_CODES = frozenset({mt.METHOD_NOT_FOUND, mt.INVALID_PARAMS})
_TRANSPORT_ERRORS = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    httpx2.HTTPError,
    OSError,
)


def describe(exc: BaseException) -> str:
    """A one-line, secret-free description of a (possibly grouped) exception."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return redact(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


StdioOpener = Callable[[McpServerSpec, TextIO], Transport]
"""Starts a stdio server and gives its message streams: `(spec, stderr file) -> transport`.

The default runs the command on this host; a sandbox runner passes one that runs it in the box."""


def host_stdio(spec: McpServerSpec, errlog: TextIO) -> Transport:
    """The server as a subprocess of this process (the SDK's stdio client)."""
    params = StdioServerParameters(command=spec.command, args=list(spec.args), env=dict(spec.env))
    return stdio_client(params, errlog=errlog)


class McpConnection:
    """A connected MCP server: its tools, and calls to them that never raise."""

    def __init__(self, spec: McpServerSpec, *, stdio: StdioOpener = host_stdio) -> None:
        self.spec = spec
        self._stdio = stdio
        self.timeout = spec.timeout.total_seconds() if spec.timeout is not None else DEFAULT_TIMEOUT
        self.connect_timeout = max(self.timeout, MIN_CONNECT_TIMEOUT)
        self.tools: tuple[mt.Tool, ...] = ()
        """What the server lists (before any allowlist)."""
        self.error: str | None = None
        """Why the connection failed or ended early; None while it is fine."""
        self._client: Client | None = None
        self._ready = anyio.Event()
        self._closing = anyio.Event()
        self._done = anyio.Event()
        self._scope = anyio.CancelScope()
        self._stderr: TextIO | None = None
        for value in (*spec.env.values(), *spec.headers.values()):
            register_secret(value)

    @property
    def server_id(self) -> str:
        return self.spec.id

    @property
    def connected(self) -> bool:
        return self._client is not None

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, list the tools, then hold the connection until `close()`. Never raises."""
        try:
            with self._scope:
                try:
                    async with self._open() as client:
                        self.tools = await self._list_tools(client)
                        self._client = client
                        self._ready.set()
                        await self._closing.wait()
                except Exception as exc:  # noqa: BLE001 - a failing MCP server (any SDK, transport or server error) must end this connection only, never the turn
                    self.error = describe(exc) + await self._stderr_tail()
                    log.warning("mcp.connection_failed", server=self.server_id, error=self.error)
            if self._scope.cancelled_caught and self.error is None and not self._closing.is_set():
                self.error = f"connecting took longer than {self.connect_timeout:g}s"
        finally:
            self._client = None
            self._ready.set()
            self._done.set()
            with anyio.CancelScope(shield=True):
                await self._close_stderr()

    async def wait_ready(self) -> bool:
        """Wait until connected (True) or failed (False), at most `connect_timeout` seconds."""
        with anyio.move_on_after(self.connect_timeout):
            await self._ready.wait()
        if not self._ready.is_set():
            self._scope.cancel()
            await self._done.wait()
        return self.connected

    async def close(self) -> None:
        """End the connection and wait (bounded by the SDK's own shutdown limits) until it is closed."""
        self._closing.set()
        with anyio.CancelScope(shield=True), anyio.move_on_after(15):
            await self._done.wait()
        if not self._done.is_set():
            self._scope.cancel()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[Client]:
        spec = self.spec
        if spec.transport == "process":  # Yao's process servers run in-process (process.py)
            yield cast(Client, ProcessClient(spec))
            return
        async with AsyncExitStack() as stack:
            if spec.transport == "stdio":
                self._stderr = await anyio.to_thread.run_sync(_temp_text_file)
                transport: Transport = self._stdio(spec, self._stderr)
            elif spec.transport == "sse":
                transport = sse_client(
                    spec.url,
                    headers=dict(spec.headers),
                    timeout=self.connect_timeout,
                    sse_read_timeout=SSE_READ_TIMEOUT,
                )
            else:
                limit = self.connect_timeout
                timeout = httpx2.Timeout(limit, read=max(limit, SSE_READ_TIMEOUT))
                http = httpx2.AsyncClient(headers=spec.headers, timeout=timeout)
                await stack.enter_async_context(http)
                transport = streamable_http_client(spec.url, http_client=http)
            client = Client(
                transport,
                read_timeout_seconds=self.connect_timeout,
                cache=None,
                client_info=mt.Implementation(name="cage", version="1"),
            )
            yield await stack.enter_async_context(client)

    async def _list_tools(self, client: Client) -> tuple[mt.Tool, ...]:
        tools: list[mt.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tuple(tools)

    async def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        tail = await anyio.to_thread.run_sync(_tail, self._stderr)
        return f"; server stderr: {redact(tail)}" if tail else ""

    async def _close_stderr(self) -> None:
        if self._stderr is not None:
            stderr, self._stderr = self._stderr, None
            await anyio.to_thread.run_sync(stderr.close)

    # -- calls -------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: Mapping[str, JsonValue]) -> ToolResult:
        """Call `tool`; every failure comes back as an error result tagged for the retry policy."""
        client = self._client
        server = self.server_id
        if client is None:
            why = f": {self.error}" if self.error else ""
            return failure("transport", f"MCP server {server!r} is not connected{why}", server=server)
        try:
            # The SDK's own read timeout cancels the request on the server; this one is a backstop.
            with anyio.fail_after(self.timeout + 5):
                result = await client.call_tool(tool, dict(arguments), read_timeout_seconds=self.timeout)
        except TimeoutError:
            return self._timed_out(tool)
        except MCPError as exc:
            if exc.code == mt.REQUEST_TIMEOUT:
                return self._timed_out(tool)
            message = f"MCP error {exc.code} from {server!r}: {redact(exc.message)}"
            if exc.code in _NOT_RETRYABLE_CODES:  # the call itself is wrong: the same call fails again
                return failure("schema", message, server=server, retryable=False)
            return failure("protocol", message, server=server)
        except _TRANSPORT_ERRORS as exc:
            return failure("transport", f"MCP server {server!r} unreachable: {describe(exc)}", server=server)
        except (ValidationError, RuntimeError) as exc:  # the server's answer broke the protocol
            message = f"bad answer from MCP server {server!r}: {describe(exc)}"
            return failure("protocol", message, server=server)
        text = result_text(result)
        if result.is_error:
            return failure("tool_error", text or f"{tool} failed without a message", server=server)
        return ToolResult(output=text, metadata={"server": server})

    def _timed_out(self, tool: str) -> ToolResult:
        return failure(
            "timeout",
            f"{tool} on MCP server {self.server_id!r} timed out after {self.timeout:g}s",
            server=self.server_id,
        )


def _temp_text_file() -> TextIO:
    return cast(TextIO, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))


def _tail(stream: IO[str]) -> str:
    stream.flush()
    stream.seek(0)
    text = stream.read()
    return text[-STDERR_TAIL:].strip()
