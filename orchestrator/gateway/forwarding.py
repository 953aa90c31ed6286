"""The gateway's ASGI app: authenticate the token, forward to the real host, stream back.

Routes: `/model/<connector id>/<path>` and `/mcp/<server id>/<path>`. The token comes as the
runner's API key (`x-api-key` for Anthropic clients, `Authorization: Bearer` for OpenAI ones) or
as `x-cage-token` (MCP clients). It is stripped with every other credential header before the
request goes on; the upstream's real credentials are added instead. The path must stay below
the upstream's own base path and may hold no `.`/`..` segment. The answer is passed through
chunk by chunk as it arrives (no buffering, so SSE events keep their timing); a client that
goes away closes the upstream request. Nothing here logs a header or a body.

HTTP parsing is uvicorn's, HTTP out is httpx's; this module only moves bytes between them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote

import anyio
import httpx
import structlog

from orchestrator.gateway.grants import Grant, GrantRegistry, Upstream, UpstreamKind
from orchestrator.gateway.usage import UsageMeter
from orchestrator.redaction import redact

log = structlog.get_logger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY_BYTES = 64 << 20
"""Largest request body forwarded (a long conversation with images fits many times over)."""
TOKEN_HEADER = "x-cage-token"
_CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "api-key", TOKEN_HEADER})
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
    }
)
_KINDS: dict[str, UpstreamKind] = {"model": "model", "mcp": "mcp"}


class GatewayRefusal(Exception):
    """A request the gateway answers itself (bad token, unknown route, oversized body)."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message


def request_token(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The gateway token: `x-cage-token`, `x-api-key`/`api-key`, or a bearer `Authorization`."""
    found: dict[str, str] = {}
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1").lower()
        if name in _CREDENTIAL_HEADERS:
            found[name] = raw_value.decode("latin-1").strip()
    for name in (TOKEN_HEADER, "x-api-key", "api-key"):
        if found.get(name):
            return found[name]
    auth = found.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def upstream_path(route_rest: str, upstream: Upstream) -> str:
    """The path to request upstream, checked to stay below the upstream's base path.

    Raises:
        GatewayRefusal: a dot segment, or a path outside the base path.
    """
    segments = route_rest.split("/")
    if any(unquote(s) in (".", "..") for s in segments):
        raise GatewayRefusal(400, "invalid_request_error", "dot segments are not allowed in gateway paths")
    path = "/" + route_rest if route_rest else "/"
    base = upstream.base_path
    if base and path != base and not path.startswith(base.rstrip("/") + "/"):
        raise GatewayRefusal(403, "permission_error", "path is outside this upstream")
    return path


def forward_headers(headers: list[tuple[bytes, bytes]], upstream: Upstream) -> list[tuple[str, str]]:
    """The client's headers without credentials and hop-by-hop ones, plus the upstream's own."""
    replaced = {name.lower() for name in upstream.headers}
    out: list[tuple[str, str]] = []
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1").lower()
        if name in _CREDENTIAL_HEADERS or name in _HOP_BY_HOP or name in replaced:
            continue
        out.append((name, raw_value.decode("latin-1")))
    out.append(("accept-encoding", "identity"))  # usage is read from the bytes as they pass
    out.extend(upstream.headers.items())
    return out


def response_headers(response: httpx.Response) -> list[tuple[bytes, bytes]]:
    out = []
    for name, value in response.headers.raw:
        lowered = name.decode("latin-1").lower()
        if lowered in _HOP_BY_HOP and lowered != "content-length":
            continue
        out.append((name, value))
    return out


class GatewayApp:
    """The ASGI application (HTTP only; lifespan and websockets are refused)."""

    def __init__(self, registry: GrantRegistry, client: httpx.AsyncClient) -> None:
        self._registry = registry
        self._client = client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        started = time.monotonic()
        try:
            grant, upstream, path = self._route(scope)
            body = await _read_body(receive)
        except GatewayRefusal as refusal:
            log.info("gateway.refused", status=refusal.status, reason=refusal.kind, path=scope["path"][:200])
            await _refuse(send, refusal)
            return
        query = scope.get("query_string", b"").decode("latin-1")
        url = upstream.origin + path + (f"?{query}" if query else "")
        request = self._client.build_request(
            scope["method"], url, headers=forward_headers(scope["headers"], upstream), content=body
        )
        status = await self._relay(request, receive, send, grant)
        (log.info if status >= 400 else log.debug)(  # every turn's total is logged at info on revoke
            "gateway.request",
            sandbox=grant.sandbox,
            turn_id=grant.turn_id,
            upstream=f"{upstream.kind}/{upstream.id}",
            method=scope["method"],
            status=status,
            ms=int((time.monotonic() - started) * 1000),
        )

    def _route(self, scope: Scope) -> tuple[Grant, Upstream, str]:
        raw_path: bytes = scope.get("raw_path") or scope["path"].encode()
        parts = raw_path.decode("latin-1").lstrip("/").split("/", 2)
        kind = _KINDS.get(parts[0]) if parts else None
        if kind is None or len(parts) < 2 or not parts[1]:
            raise GatewayRefusal(404, "not_found_error", "no such gateway route")
        token = request_token(scope["headers"])
        grant = self._registry.lookup(token) if token else None
        if grant is None:
            raise GatewayRefusal(401, "authentication_error", "missing, unknown or expired gateway token")
        upstream_id = unquote(parts[1])
        upstream = grant.upstream(kind, upstream_id)
        if upstream is None:
            raise GatewayRefusal(403, "permission_error", f"this token may not use {kind} {upstream_id!r}")
        return grant, upstream, upstream_path(parts[2] if len(parts) > 2 else "", upstream)

    async def _relay(self, request: httpx.Request, receive: Receive, send: Send, grant: Grant) -> int:
        """Send upstream and stream the answer back; stop both sides when the client leaves."""
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            await _refuse(send, GatewayRefusal(502, "api_error", f"upstream unreachable: {redact(str(exc))}"))
            return 502
        meter = UsageMeter(response.headers.get("content-type", ""))
        try:
            headers = response_headers(response)
            await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
            async with anyio.create_task_group() as tg:

                async def watch_disconnect() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(watch_disconnect)
                try:
                    async for chunk in response.aiter_raw():
                        meter.feed(chunk)
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except httpx.HTTPError as exc:
                    # The upstream broke off mid-answer: return without ending the response, so
                    # uvicorn drops the connection and the client sees a cut, not a short answer.
                    log.warning("gateway.upstream_cut", sandbox=grant.sandbox, error=redact(str(exc)))
                else:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                tg.cancel_scope.cancel()
        finally:
            await response.aclose()
            grant.record(meter.close())
        return response.status_code


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise GatewayRefusal(400, "invalid_request_error", "client went away")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise GatewayRefusal(413, "request_too_large", f"request body over {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _refuse(send: Send, refusal: GatewayRefusal) -> None:
    body = json.dumps({"type": "error", "error": {"type": refusal.kind, "message": refusal.message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": refusal.status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})
