"""`HttpMcpServer`: the `calc` server over streamable HTTP, in a thread, on 127.0.0.1.

```python
with HttpMcpServer(state_dir, token="s3cret") as server:
    server.url  # http://127.0.0.1:<port>/mcp
```
With `token`, requests without `Authorization: Bearer <token>` get 401 (checks that the
client sends the spec's headers). Uvicorn binds a socket opened here, so the port is known before
the thread starts and nothing else can take it.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from types import TracebackType

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.fakes.mcp_servers.calc import build


class _BearerGate:
    """Answers 401 to HTTP requests that do not carry the expected bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != self._expected:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await self._app(scope, receive, send)


class HttpMcpServer:
    def __init__(self, state_dir: Path, *, token: str | None = None) -> None:
        self.state_dir = state_dir
        self.requests_seen = 0
        app: ASGIApp = build(state_dir).streamable_http_app()
        if token is not None:
            app = _BearerGate(app, token)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="on", ws="none")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, name="mcp-http", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def __enter__(self) -> HttpMcpServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the MCP HTTP server did not start")
            time.sleep(0.02)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()
