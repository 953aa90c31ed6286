"""`ModelGateway`: the gateway server inside the orchestrator process, and its per-turn grants.

```python
gateway = ModelGateway.from_settings(settings)
access = await gateway.grant(sandbox="…", owner="alice", assistant_id="a.b", turn_id="t1",
                             connector=connector, mcp_servers=servers)
access.connector  # give this to the runner: the token as key, the gateway as base URL
usage = gateway.revoke(access)  # at the end of the turn; the token is dead from here on
await gateway.aclose()
```
The server is uvicorn on the process's event loop, started by the first `grant()` (or an
explicit `start()`), so `cage serve`, `cage run` and every embedding of `PipelineService` get it
without set-up. It never installs signal handlers: the process's own server or CLI owns those.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field

import anyio
import httpx
import structlog
import uvicorn
from anyio import to_thread

from orchestrator.dsl import ConnectorSpec, McpServerSpec
from orchestrator.errors import CageError, ErrorKind
from orchestrator.gateway.address import GatewayAddress, default_bind_host, sandbox_base_url
from orchestrator.gateway.forwarding import GatewayApp
from orchestrator.gateway.grants import DEFAULT_TTL, Grant, GrantRegistry, Upstream
from orchestrator.gateway.rewrite import (
    mcp_upstream,
    model_upstream,
    proxied,
    sandbox_connector,
    sandbox_mcp_server,
)
from orchestrator.settings import Settings
from orchestrator.stream import Usage

log = structlog.get_logger(__name__)

_START_TIMEOUT = 10.0
UPSTREAM_TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=30.0)
"""Reads may pause long (a model thinking, an idle MCP stream), connects may not."""


class GatewayError(CageError):
    """The gateway could not start (its address is taken or not available)."""

    code = "gateway_failed"
    kind = ErrorKind.INFRA


def _upstream_client() -> httpx.AsyncClient:
    """The client the gateway forwards with (blocking: imports the HTTP stack, loads the CA store)."""
    return httpx.AsyncClient(timeout=UPSTREAM_TIMEOUT, follow_redirects=False)


class _QuietServer(uvicorn.Server):
    """uvicorn without its signal handlers: a server embedded in a process that has its own."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.exit_requested = asyncio.Event()
        """Set with `should_exit`: the main loop wakes at once instead of at its next tick."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def main_loop(self) -> None:
        """uvicorn's loop, which looks at `should_exit` every 0.1 s, woken by `exit_requested`
        too: a `cage run` that ends its turn does not wait for the next tick to stop."""
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.exit_requested.wait(), 0.1)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown (lifespan off), looking for its connections to end every 10 ms
        instead of first sleeping 0.1 s: the keep-alive connection the egress proxy holds closes
        at once when asked, and a `cage run` ends that much sooner."""
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.config.timeout_graceful_shutdown):
                while self.server_state.connections or self.server_state.tasks:  # noqa: ASYNC110 - no event
                    await asyncio.sleep(0.01)
        for task in self.server_state.tasks:
            task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")


@dataclass(frozen=True)
class SandboxAccess:
    """What one turn gets: the token, and the connector and MCP servers rewritten to use it."""

    token: str = field(repr=False)
    grant: Grant
    connector: ConnectorSpec | None
    mcp_servers: tuple[McpServerSpec, ...]


class ModelGateway:
    """The credential-injecting reverse proxy for model connectors and HTTP MCP servers."""

    def __init__(
        self, *, host: str = "", port: int = 0, token_ttl: float = DEFAULT_TTL, pod_ip: str = ""
    ) -> None:
        self._host = host or default_bind_host()
        self._pod_ip = pod_ip
        self._port = port
        self.registry = GrantRegistry(ttl=token_ttl)
        self._address: GatewayAddress | None = None
        self._server: _QuietServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._sock: socket.socket | None = None
        self._client: httpx.AsyncClient | None = None
        self._lock = anyio.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> ModelGateway:
        return cls(
            host=settings.gateway_host,
            port=settings.gateway_port,
            token_ttl=settings.gateway_token_ttl,
            pod_ip=settings.k8s_pod_ip if settings.backend == "kubernetes" else "",
        )

    @property
    def address(self) -> GatewayAddress | None:
        """Where it listens, once started (the egress relay and the docs need the real port)."""
        return self._address

    async def start(self) -> GatewayAddress:
        """Bind and serve (idempotent); returns once the server takes requests.

        Raises:
            GatewayError: the address cannot be bound, or the server did not start.
        """
        address = await self.bind()
        task = self._task
        with anyio.move_on_after(_START_TIMEOUT):
            while not self._serving() and task is not None and not task.done():  # noqa: ASYNC110 - uvicorn has no event
                await anyio.sleep(0.01)
        if not self._serving():
            async with self._lock:
                if self._task is task:
                    await self._stop()
                    self._address = None
            raise GatewayError("model gateway did not start")
        return address

    async def bind(self) -> GatewayAddress:
        """Bind the address and set the server up in the background (idempotent); the address, at once.

        Until the server runs, connections wait in the socket's backlog; `start` (and `grant`)
        waits for it. The set-up (the upstream client: the HTTP stack's import, the TLS trust
        store) takes a tenth of a second and more, so a caller that only needs the port (an
        isolated sandbox's relay, made meanwhile) does not wait for it.

        Raises:
            GatewayError: the address cannot be bound.
        """
        async with self._lock:
            if self._address is not None:
                return self._address
            # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP,
            # and without it Nagle holds each small SSE write for the client's delayed ACK (~40 ms).
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                sock.bind((self._host, self._port))
            except OSError as exc:
                sock.close()
                where = f"{self._host}:{self._port}"
                raise GatewayError(f"model gateway cannot bind {where}: {exc.strerror}") from exc
            sock.listen(256)
            sock.setblocking(False)
            self._sock = sock
            self._task = asyncio.get_running_loop().create_task(self._serve(sock))
            self._address = GatewayAddress(self._host, sock.getsockname()[1])
            log.info("gateway.started", host=self._address.host, port=self._address.port)
            return self._address

    async def _serve(self, sock: socket.socket) -> None:
        """The server's task: its upstream client (made in a worker thread), then uvicorn on `sock`."""
        try:
            client = await to_thread.run_sync(_upstream_client)
            self._client = client
            config = uvicorn.Config(
                GatewayApp(self.registry, client),
                log_config=None,
                access_log=False,
                lifespan="off",
                server_header=False,  # the upstream's own `server` and `date` pass through instead
                date_header=False,
                timeout_keep_alive=30,
                timeout_graceful_shutdown=5,
            )
            self._server = _QuietServer(config)
            await self._server.serve(sockets=[sock])
        finally:
            sock.close()

    def _serving(self) -> bool:
        return self._server is not None and self._server.started

    async def grant(
        self,
        *,
        sandbox: str,
        owner: str,
        assistant_id: str,
        turn_id: str,
        connector: ConnectorSpec | None,
        mcp_servers: Sequence[McpServerSpec] = (),
        isolated: bool = False,
    ) -> SandboxAccess:
        """A token for one turn in `sandbox`, bound to `connector` and the HTTP MCP servers.

        Raises:
            GatewayError: the gateway could not start.
        """
        address = await self.start()
        upstreams: list[Upstream] = []
        if connector is not None:
            upstreams.append(model_upstream(connector))
        upstreams += [mcp_upstream(s) for s in mcp_servers if proxied(s)]
        token, grant = self.registry.issue(
            sandbox=sandbox, owner=owner, assistant_id=assistant_id, turn_id=turn_id, upstreams=upstreams
        )
        root = sandbox_base_url(address, isolated=isolated, pod_ip=self._pod_ip)
        return SandboxAccess(
            token=token,
            grant=grant,
            connector=sandbox_connector(connector, token, root) if connector is not None else None,
            mcp_servers=tuple(sandbox_mcp_server(s, token, root) if proxied(s) else s for s in mcp_servers),
        )

    def revoke(self, access: SandboxAccess) -> Usage:
        """End the turn's token; logs and returns the usage metered through it."""
        grant = access.grant
        usage = self.registry.revoke(grant)
        log.info(
            "gateway.turn_usage",
            owner=grant.owner,
            assistant=grant.assistant_id,
            turn_id=grant.turn_id,
            sandbox=grant.sandbox,
            requests=grant.requests,
            input_tokens=usage.input_tokens,
            cached_input_tokens=usage.cached_input_tokens,
            output_tokens=usage.output_tokens,
            reasoning_tokens=usage.reasoning_tokens,
        )
        return usage

    def revoke_sandbox(self, sandbox: str) -> int:
        """Revoke every token of a sandbox that is going away."""
        return self.registry.revoke_sandbox(sandbox)

    async def aclose(self) -> None:
        """Stop serving (open streams get a short grace) and close the upstream client."""
        async with self._lock:
            await self._stop()
            self._address = None

    async def _stop(self) -> None:
        task, server = self._task, self._server
        if task is not None:
            if server is not None:
                server.should_exit = True
                server.exit_requested.set()
            else:  # still making its upstream client: no server to ask yet
                task.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.wait({task})
            if not task.cancelled() and task.exception() is not None:
                log.warning("gateway.stopped_with_error", error=str(task.exception()))
        if self._sock is not None:  # a task cancelled before it ran never closed it
            self._sock.close()
        self._server = self._task = self._sock = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None
