"""`Gate`: the ASGI layer every HTTP request passes before the app reads a byte of its body.

FastAPI parses a request's body before its dependencies run, so an auth dependency alone lets an
unauthenticated client make the process buffer a body of any size. The gate therefore:

1. refuses a declared `Content-Length` over the route's limit with a 413 naming the limit, and
   counts the bytes of bodies sent without one (413 as soon as the count passes the limit);
2. authenticates API routes (`/v1/...`) from the headers alone, before the body is read, and
   hands the principal to the `caller` dependency through the request scope (so a request is
   authenticated, and charged to its key's rate limit, once);
3. with authentication off, answers only loopback `Host` names (no DNS rebinding);
4. charges unauthenticated and failed requests to a bucket per client address: past it they are
   answered 429 with `Retry-After` instead of 401 (a valid key is never refused by it, so clients
   sharing an address behind a proxy are not locked out by one of them; a key check costs one
   indexed lookup and one hash).

Attachment routes (a turn's files travel base64-encoded in the body) get the larger limit.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchestrator.api.auth import Principal, is_loopback
from orchestrator.api.errors import KeyRateLimited, cage_error_handler
from orchestrator.api.ratelimit import RateLimiter
from orchestrator.error_table import close_code
from orchestrator.errors import CageError, ErrorKind, Forbidden, Unauthorized

PRINCIPAL_SCOPE_KEY = "cage.principal"
"""Where the gate leaves the authenticated `Principal` in the ASGI scope."""

_ATTACHMENT_ROUTES = re.compile(r"^/v1/(assistants/[^/]+/stream|chat/completions)$")
_PUBLIC = ("/healthz", "/readyz", "/metrics")


def _mib(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n} bytes"


class BodyTooLarge(CageError):
    """A request body over the route's limit."""

    code = "body_too_large"
    kind = ErrorKind.TOO_LARGE


def principal_of(scope: Scope) -> Principal | None:
    """The principal the gate authenticated for this request, if any."""
    found: Any = scope.get("state", {}).get(PRINCIPAL_SCOPE_KEY)
    return found if isinstance(found, Principal) else None


def client_address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def bearer_from_scope(scope: Scope) -> str | None:
    headers = dict(scope.get("headers") or [])
    scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class Gate:
    """Body limits, early authentication and the failed-request bucket (see the module doc)."""

    def __init__(
        self, app: ASGIApp, *, max_body_bytes: int, max_attachment_body_bytes: int, failures: RateLimiter
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_attachment_body_bytes = max_attachment_body_bytes
        self.failures = failures

    def _host_allowed(self, scope: Scope) -> bool:
        """With authentication off every caller is an admin, so a page on another site that
        rebinds its name to 127.0.0.1 (DNS rebinding) must not reach the server: only loopback
        `Host` names are answered then."""
        state = getattr(scope["app"].state, "api", None)
        if state is None or state.auth.enabled:
            return True
        host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return is_loopback(name)

    def limit_for(self, path: str) -> int:
        if _ATTACHMENT_ROUTES.match(path):
            return self.max_attachment_body_bytes
        return self.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and not self._host_allowed(scope):
            await send(
                {"type": "websocket.close", "code": close_code("forbidden"), "reason": "host not allowed"}
            )
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self._host_allowed(scope):
            await self._refuse(scope, receive, send, Forbidden("this server answers only on loopback names"))
            return
        path: str = scope.get("path", "")
        limit = self.limit_for(path)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, receive, send, self._too_large(limit))
            return
        if path.startswith("/v1/"):
            refusal = await self._authenticate(scope)
            if refusal is not None:
                await self._refuse(scope, receive, send, refusal)
                return
        await self._counted(scope, receive, send, limit)

    def _too_large(self, limit: int) -> BodyTooLarge:
        return BodyTooLarge(
            f"request body too large: the limit for this route is {_mib(limit)} ({limit} bytes)"
        )

    async def _authenticate(self, scope: Scope) -> CageError | None:
        state = getattr(scope["app"].state, "api", None)
        if state is None:  # not started yet (or shutting down): the route answers for itself
            return None
        address = "ip:" + client_address(scope)
        try:
            principal = await state.auth.authenticate(bearer_from_scope(scope))
        except KeyRateLimited as exc:
            state.metrics.rate_limited.inc()
            return exc
        except Unauthorized as exc:
            try:
                self.failures.check(address)
            except KeyRateLimited as limited:
                return limited
            return exc
        except CageError as exc:
            return exc
        scope.setdefault("state", {})[PRINCIPAL_SCOPE_KEY] = principal
        return None

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, exc: CageError) -> None:
        response = await cage_error_handler(Request(scope, receive), exc)
        if isinstance(exc, BodyTooLarge):
            response.headers["Connection"] = "close"
        await response(scope, receive, send)

    async def _counted(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        """Pass the request on, counting body bytes; past `limit` answer 413 and tell the app the
        client left (it stops reading; anything it still sends is dropped)."""
        received = 0
        started = False
        refused = False

        async def counting_receive() -> Message:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refused = True
                    if not started:
                        await self._refuse(scope, receive, send, self._too_large(limit))
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, counting_receive, guarded_send)
