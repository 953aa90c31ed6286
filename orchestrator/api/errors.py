"""Cage errors to HTTP in one place (STYLE R10): the status is the error kind's
(`orchestrator/error_table.py`). Routers never catch domain errors.

Bodies are `{"error": <class name>, "detail": <message>}`; validation failures add `fields`, one
entry per bad field (`loc` and `msg`, never the rejected input, which may hold a secret).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from orchestrator.error_table import surfaces
from orchestrator.errors import CageError, RateLimited, Unauthorized
from orchestrator.pipeline.load_gate import Overloaded
from orchestrator.redaction import redact

log = structlog.get_logger(__name__)


class KeyRateLimited(RateLimited):
    """One API key (or one client address, for failed requests) made more requests than its rate
    allows; `retry_after` says when to come back."""

    code = "key_rate_limited"

    def __init__(self, retry_after: float, subject: str = "this API key") -> None:
        self.retry_after = retry_after
        super().__init__(f"rate limit exceeded for {subject}; retry in {retry_after:.1f}s")


OPENAI_PATHS = ("/v1/chat/completions", "/v1/models")
"""Routes whose errors take OpenAI's shape, so OpenAI clients show the message."""


def error_body(
    request: Request,
    kind: str,
    detail: str,
    fields: list[dict[str, str]] | None = None,
    *,
    code: str | None = None,
) -> dict[str, Any]:
    """`{"error": kind, "code"?: ..., "detail": ...}`; on the OpenAI routes `{"error": {"message",
    "type", "param", "code"}}`. `code` is a Cage error's stable code (docs/protocol.md)."""
    if request.url.path.startswith(OPENAI_PATHS):
        param = fields[0]["loc"] if fields else None
        return {"error": {"message": detail, "type": kind, "param": param, "code": code}}
    body: dict[str, Any] = {"error": kind, "detail": detail}
    if code is not None:
        body["code"] = code
    if fields is not None:
        body["fields"] = fields
    return body


def field_errors(errors: Sequence[Any]) -> list[dict[str, str]]:
    """`[{loc: "body.messages.0.role", msg: ...}]` from pydantic error dicts, without the input."""
    return [{"loc": ".".join(str(p) for p in e["loc"]), "msg": str(e["msg"])} for e in errors]


def validation_body(request: Request, errors: Sequence[Any]) -> dict[str, Any]:
    fields = field_errors(errors)
    detail = "; ".join(f"{f['loc']}: {f['msg']}" for f in fields) or "invalid request"
    return error_body(request, "ValidationError", detail, fields)


async def cage_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, CageError)
    status = surfaces(exc).http_status
    headers: dict[str, str] = {}
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, KeyRateLimited | Overloaded):
        headers["Retry-After"] = str(max(1, round(exc.retry_after)))
    if status >= 500:
        log.warning("request failed", error=exc.code, detail=redact(str(exc)), status=status)
    body = error_body(request, type(exc).__name__, redact(str(exc)), code=exc.code)
    return JSONResponse(body, status_code=status, headers=headers)


async def request_validation_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return JSONResponse(validation_body(request, exc.errors()), status_code=422)


async def model_validation_handler(request: Request, exc: Exception) -> JSONResponse:
    """A pydantic model built inside a handler (an assistant's package, a sandbox spec) was invalid."""
    assert isinstance(exc, ValidationError)
    return JSONResponse(validation_body(request, exc.errors()), status_code=422)


async def unhandled_error_handler(request: Request, exc: Exception) -> JSONResponse:
    error_id = uuid.uuid4().hex[:12]
    log.error("unhandled error", error_id=error_id, exc_info=exc)
    return JSONResponse({"error": "InternalError", "error_id": error_id}, status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(CageError, cage_error_handler)
    app.add_exception_handler(RequestValidationError, request_validation_handler)
    app.add_exception_handler(ValidationError, model_validation_handler)
    app.add_exception_handler(Exception, unhandled_error_handler)
