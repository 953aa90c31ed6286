"""The published OpenAPI document: readable operation ids and Cage's real error bodies on every route.

FastAPI derives operation ids from the function name plus path and method
(`list_sessions_v1_sessions_get`) and documents only its own 422 shape, which Cage's handlers
never send. Client generators read both, so the document is post-processed once: the id is the
handler's name (`admin_` in front for the admin API) and every route lists the error statuses it
can answer with, as `ErrorBody` (or `OpenAIErrorBody` on the OpenAI-compatible routes).
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict

from orchestrator.api.errors import OPENAI_PATHS


class FieldError(BaseModel):
    model_config = ConfigDict(frozen=True)
    loc: str
    """Where: `body.messages.0.role`, `query.limit`."""
    msg: str


class ErrorBody(BaseModel):
    """Every error answer outside the OpenAI routes."""

    model_config = ConfigDict(frozen=True)
    error: str
    """The error class: `NotFound`, `Conflict`, `Unauthorized`, `RequestValidationError`, ..."""
    code: str | None = None
    """A Cage error's stable code (`not_found`, `config_error`, ...: docs/protocol.md, "Error codes")."""
    detail: str | None = None
    """What went wrong, for a person; never a secret."""
    fields: list[FieldError] | None = None
    """On 422: each field at fault."""
    error_id: str | None = None
    """On 500: the id of the server log line that holds the traceback (the body carries nothing else)."""


class OpenAIError(BaseModel):
    model_config = ConfigDict(frozen=True)
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAIErrorBody(BaseModel):
    """Errors of `/v1/chat/completions` and `/v1/models`, in OpenAI's shape."""

    model_config = ConfigDict(frozen=True)
    error: OpenAIError


ERROR_STATUSES = {
    "400": "Bad arguments (an unusable workspace or session id).",
    "401": "No API key, or a malformed, unknown or revoked one.",
    "403": "An admin route with a user key.",
    "404": "No such thing, or another owner's.",
    "409": "A conflict: a turn already running, an id taken.",
    "422": "A body or parameter that does not validate (`fields` names each).",
    "429": "Rate limited or over a cap (`Retry-After`).",
    "500": "A bug: only an `error_id` to find in the server log.",
    "503": "No container engine or no database.",
}
OPEN_ROUTES = ("/healthz", "/readyz", "/metrics")
"""Routes without authentication: they answer neither 401 nor 403."""


def operation_id(default: str, path: str, method: str) -> str:
    """`list_sessions`, `admin_list_sessions`: the handler's name, unique across the API.

    FastAPI's default id is `<handler>` + the path and method with every non-word character as
    `_`; the handler's name is what is left once that suffix is cut off.
    """
    suffix = re.sub(r"\W", "_", path) + "_" + method
    name = default.removesuffix(suffix) if default.endswith(suffix) else default
    return f"admin_{name}" if path.startswith("/v1/admin/") else name


def _ref(name: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """The document, generated from the routes, with ids and error responses filled in."""
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    components: dict[str, Any] = schema.setdefault("components", {}).setdefault("schemas", {})
    for model in (ErrorBody, OpenAIErrorBody):
        body = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(body.pop("$defs", {}))
        components[model.__name__] = body
    for path, operations in schema.get("paths", {}).items():
        body_name = "OpenAIErrorBody" if path.startswith(OPENAI_PATHS) else "ErrorBody"
        for method, operation in operations.items():
            if "operationId" in operation:
                operation["operationId"] = operation_id(operation["operationId"], path, method)
            responses: dict[str, Any] = operation.setdefault("responses", {})
            for status, description in ERROR_STATUSES.items():
                if path in OPEN_ROUTES and status not in ("500", "503"):
                    continue
                if status == "422" or status not in responses:
                    responses[status] = {"description": description, "content": _ref(body_name)}
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    return schema


def install_openapi(app: FastAPI) -> None:
    """Serve `build_openapi(app)` at `/openapi.json` (built on first request, then cached)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_openapi(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
