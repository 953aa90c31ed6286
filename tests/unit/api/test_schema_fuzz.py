"""Schemathesis against the served OpenAPI: generated requests (valid and invalid) never get a 500,
and a rejected body is a 422 that names the field."""

from __future__ import annotations

from typing import Any

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from tests.unit.api.conftest import Served

EXAMPLES = 15
SKIP = ("/v1/sessions/{session_id}/stream",)  # a live subscription: it ends when the client leaves


def names_a_field(body: dict[str, Any]) -> bool:
    """A 422 names what is wrong: request fields, an OpenAI `param`, or a document key path."""
    error = body.get("error")
    if isinstance(error, dict):
        return bool(error.get("param"))
    if error == "ValidationError":
        return all(f["loc"] for f in body["fields"]) and bool(body["fields"])
    return error in ("ConfigError", "ConfigErrors") and ": " in body["detail"]


def operations(served: Served) -> list[schemathesis.APIOperation]:
    config = schemathesis.Config()
    config.projects.default.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
    schema = schemathesis.openapi.from_url(served.url + "/openapi.json", config=config)
    found = [result.ok() for result in schema.get_all_operations()]
    return [op for op in found if op.path not in SKIP]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("who", ["admin", "alice"])
def test_generated_requests_never_get_a_server_error(served: Served, who: str) -> None:
    ops = operations(served)
    assert len(ops) >= 25
    seen: dict[str, set[int]] = {}
    with requests.Session() as session:
        for op in ops:

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
                phases=[hypothesis.Phase.generate],
            )
            @given(case=op.as_strategy())
            def call(case: schemathesis.Case) -> None:
                response = case.call(
                    base_url=served.url, session=session, headers=served.auth(who), timeout=30
                )
                seen.setdefault(case.operation.label, set()).add(response.status_code)
                assert response.status_code < 500, (
                    case.operation.label,
                    response.status_code,
                    response.text[:300],
                )
                if response.status_code == 422:
                    assert names_a_field(response.json()), (case.operation.label, response.text[:300])

            call()
    print({k: sorted(v) for k, v in seen.items()})
    assert any(422 in codes for codes in seen.values())
    assert sum(1 for codes in seen.values() if any(c < 300 for c in codes)) >= (15 if who == "admin" else 5)
