"""Cage errors to HTTP, by class, in one place (STYLE R10). Routers never catch domain errors.

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

from orchestrator.errors import (
    CageError,
    CapacityError,
    ConfigError,
    Conflict,
    EngineUnavailable,
    Forbidden,
    ImageBuildError,
    ModelError,
    NotFound,
    RateLimited,
    RunnerError,
    SandboxError,
    SandboxNotFound,
    Unauthorized,
    UsageError,
    WorkspaceError,
)
from orchestrator.redaction import redact
from orchestrator.store import StoreError

log = structlog.get_logger(__name__)

_STATUS: dict[type[CageError], int] = {
    NotFound: 404,
    SandboxNotFound: 404,
    Forbidden: 403,
    Unauthorized: 401,
    Conflict: 409,
    RateLimited: 429,
    CapacityError: 429,
    ConfigError: 422,
    UsageError: 400,
    WorkspaceError: 400,
    EngineUnavailable: 503,
    StoreError: 503,
    ImageBuildError: 502,
    SandboxError: 502,
    RunnerError: 502,
    ModelError: 502,
}


class KeyRateLimited(RateLimited):
    """One API key (or one client address, for failed requests) made more requests than its rate
    allows; `retry_after` says when to come back."""

    def __init__(self, retry_after: float, subject: str = "this API key") -> None:
        self.retry_after = retry_after
        super().__init__(f"rate limit exceeded for {subject}; retry in {retry_after:.1f}s")


OPENAI_PATHS = ("/v1/chat/completions", "/v1/models")
"""Routes whose errors take OpenAI's shape, so OpenAI clients show the message."""


def error_body(
    request: Request, kind: str, detail: str, fields: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """`{"error": kind, "detail": ...}`; on the OpenAI routes `{"error": {"message", "type", "param"}}`."""
    if request.url.path.startswith(OPENAI_PATHS):
        param = fields[0]["loc"] if fields else None
        return {"error": {"message": detail, "type": kind, "param": param, "code": None}}
    body: dict[str, Any] = {"error": kind, "detail": detail}
    if fields is not None:
        body["fields"] = fields
    return body


def status_for(exc: CageError) -> int:
    """The HTTP status of a Cage error: the first class in its MRO that has one, else 500."""
    return next((_STATUS[c] for c in type(exc).__mro__ if c in _STATUS), 500)


def field_errors(errors: Sequence[Any]) -> list[dict[str, str]]:
    """`[{loc: "body.messages.0.role", msg: ...}]` from pydantic error dicts, without the input."""
    return [{"loc": ".".join(str(p) for p in e["loc"]), "msg": str(e["msg"])} for e in errors]


def validation_body(request: Request, errors: Sequence[Any]) -> dict[str, Any]:
    fields = field_errors(errors)
    detail = "; ".join(f"{f['loc']}: {f['msg']}" for f in fields) or "invalid request"
    return error_body(request, "ValidationError", detail, fields)


async def cage_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, CageError)
    status = status_for(exc)
    headers: dict[str, str] = {}
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, KeyRateLimited):
        headers["Retry-After"] = str(max(1, round(exc.retry_after)))
    if status >= 500:
        log.warning("request failed", error=type(exc).__name__, detail=redact(str(exc)), status=status)
    body = error_body(request, type(exc).__name__, redact(str(exc)))
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
