"""Cluster-wide rate limit: an API key's requests spread over two replicas on one Postgres database
spend one budget; past it, both replicas answer 429 `key_rate_limited`."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.replicas.conftest import HEADERS, Replicas

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
BURST = 6


def test_a_keys_rate_limit_is_shared_by_both_replicas(replicas: Replicas) -> None:
    for replica in (replicas.a, replicas.b):  # the burst, then next to nothing: the counts are exact
        replica.env |= {"CAGE_RATE_LIMIT_BURST": str(BURST), "CAGE_RATE_LIMIT_PER_MINUTE": "0.01"}
    replicas.start()

    answers: list[tuple[str, int, str, str | None]] = []
    bodies: list[str] = []
    with httpx.Client(headers=HEADERS, timeout=60) as client:
        for i in range(4 * BURST):
            replica = (replicas.a, replicas.b)[i % 2]
            response = client.get(f"{replica.url}/v1/sessions")
            bodies.append(response.text[:200])
            code = response.json().get("code", "") if response.status_code != 200 else ""
            answers.append((replica.name, response.status_code, code, response.headers.get("retry-after")))

    served = [a for a in answers if a[1] == 200]
    refused = [a for a in answers if a[1] != 200]
    assert [a[1] for a in answers] == [200] * BURST + [429] * 3 * BURST, (answers, bodies)
    assert {a[0] for a in served} == {"a", "b"}  # each replica spent part of the one budget
    assert {a[0] for a in refused} == {"a", "b"}
    assert {a[2] for a in refused} == {"key_rate_limited"}
    assert all(a[3] is not None and int(a[3]) > 0 for a in refused)
