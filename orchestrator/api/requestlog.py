"""Request ids and one structured log line per request (pure ASGI, so streams are not buffered).

The id comes from a sane `X-Request-Id` header or is made up, is echoed in the response, and is
bound into structlog's context so every line logged while serving the request carries it. The
query string is never logged: browsers put tokens there.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import structlog
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchestrator.api.metrics import Metrics

log = structlog.get_logger("orchestrator.api.access")
REQUEST_ID_HEADER = "x-request-id"
_SANE_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def _route(scope: Scope) -> str:
    route: Any = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


class RequestLog:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(REQUEST_ID_HEADER.encode(), b"").decode("latin-1")
        request_id = given if _SANE_ID.fullmatch(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        status = 0
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message).append(REQUEST_ID_HEADER, request_id)
            elif message["type"] == "websocket.accept":
                status = 101
            await send(message)

        with structlog.contextvars.bound_contextvars(request_id=request_id):
            try:
                await self.app(scope, receive, send_with_id)
            finally:
                route = _route(scope)
                method = scope.get("method", "WS")
                self.metrics.requests.labels(method, route, str(status or 500)).inc()
                log.info(
                    "request",
                    method=method,
                    path=scope.get("path", ""),
                    route=route,
                    status=status or 500,
                    duration_ms=round((time.perf_counter() - started) * 1000, 1),
                )
