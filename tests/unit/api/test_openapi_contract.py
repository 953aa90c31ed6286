"""The published OpenAPI is usable by client generators: readable, unique operation ids, and on
every route the error answers Cage really sends (`ErrorBody`, or OpenAI's shape on its routes)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from starlette.requests import Request

from orchestrator.api import create_app
from orchestrator.api.errors import OPENAI_PATHS, error_body, validation_body
from orchestrator.api.openapi import ErrorBody, OpenAIErrorBody, operation_id
from orchestrator.settings import Settings


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    settings = Settings(docker_host="tcp://127.0.0.1:9", database_url="sqlite+aiosqlite:////nonexistent/x.db")
    document: dict[str, Any] = create_app(settings).openapi()
    return document


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, method, op) for path, ops in spec["paths"].items() for method, op in ops.items()]


def test_operation_ids_are_readable_and_unique(spec: dict[str, Any]) -> None:
    ids = [op["operationId"] for _, _, op in _operations(spec)]
    assert len(ids) == len(set(ids))
    for path, method, op in _operations(spec):
        assert re.fullmatch(r"[a-z][a-z_]*", op["operationId"]), op["operationId"]
        assert not op["operationId"].endswith(f"_{method}"), op["operationId"]
        assert op["operationId"].startswith("admin_") == path.startswith("/v1/admin/")
    assert {"list_sessions", "admin_list_sessions", "chat_completions"} <= set(ids)


def test_every_route_documents_its_error_bodies(spec: dict[str, Any]) -> None:
    for path, _, op in _operations(spec):
        body = "OpenAIErrorBody" if path.startswith(OPENAI_PATHS) else "ErrorBody"
        statuses = (
            ("500",) if path in ("/healthz", "/readyz", "/metrics") else ("401", "404", "422", "429", "500")
        )
        for status in statuses:
            content = op["responses"][status]["content"]["application/json"]["schema"]
            assert content == {"$ref": f"#/components/schemas/{body}"}, (path, status)
    assert "HTTPValidationError" not in str(spec)  # FastAPI's shape, which Cage never sends


def _request(path: str) -> Request:
    return Request({"type": "http", "method": "GET", "path": path, "headers": [], "query_string": b""})


def test_the_documented_models_match_what_the_handlers_send() -> None:
    ErrorBody.model_validate(error_body(_request("/v1/sessions/x"), "NotFound", "session 'x' not found"))
    invalid = validation_body(_request("/v1/sessions"), [{"loc": ("query", "limit"), "msg": "too big"}])
    assert ErrorBody.model_validate(invalid).fields
    openai = error_body(_request("/v1/chat/completions"), "Unauthorized", "missing API key")
    assert OpenAIErrorBody.model_validate(openai).error.message == "missing API key"


def test_the_operation_id_is_the_handler_name() -> None:
    assert (
        operation_id("get_session_v1_sessions__session_id__get", "/v1/sessions/{session_id}", "get")
        == "get_session"
    )
    assert operation_id("list_teams_v1_admin_teams_get", "/v1/admin/teams", "get") == "admin_list_teams"
