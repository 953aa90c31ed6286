"""The sandbox caps hold for the fleet: an owner at `max_sandboxes_per_owner` on replica A gets no
further box on replica B (each replica alone would count only its own boxes)."""

from __future__ import annotations

import json
import uuid

import docker
import httpx
import pytest

from tests.fakes.assistants import write_assistant
from tests.integration.replicas.conftest import HEADERS, SLEEPER, Replicas, stream_turn

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
BOXED = "tests.cappedbox"


def test_an_owners_box_on_one_replica_counts_against_its_cap_on_the_other(
    replicas: Replicas, docker_engine: docker.DockerClient
) -> None:
    write_assistant(
        replicas.app,
        BOXED,
        hooks=SLEEPER,
        sandbox={"version": "2.0", "runner": {"name": "claude"}, "lifecycle": "session"},
    )
    for replica in (replicas.a, replicas.b):
        replica.env["CAGE_MAX_SANDBOXES_PER_OWNER"] = "1"
    replicas.start()
    selector = {"label": [*replicas.label_selector, f"cage.assistant={BOXED}"]}

    def names() -> set[str]:
        return {c.name for c in docker_engine.containers.list(all=True, filters=selector)}

    first = stream_turn(
        replicas.a.url, "one-" + uuid.uuid4().hex[:8], "sleep", until="sleeping", assistant=BOXED, timeout=600
    )
    assert first[0]["props"]["event"] == "stream_start"
    [box] = names()  # the owner's one box, made by A

    # B refuses either at once (429), when it already knows A's box (the leader's sweep adopts the
    # boxes other replicas made), or inside the turn, when its create counts the fleet's boxes.
    body = {"session_id": "two-" + uuid.uuid4().hex[:8], "messages": [{"role": "user", "content": "hello"}]}
    with httpx.stream(
        "POST", f"{replicas.b.url}/v1/assistants/{BOXED}/stream", json=body, headers=HEADERS, timeout=600
    ) as response:
        if response.status_code == 429:
            refusal = json.loads(response.read())
            assert refusal["code"] == "capacity_reached", refusal
            assert "owner admin" in refusal["detail"], refusal
        else:
            assert response.status_code == 200, response.read()
            second = [json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")]
            errors = [e["props"] for e in second if e["type"] == "error"]
            assert [e["code"] for e in errors] == ["capacity_reached"], json.dumps(second)[-3000:]
            assert "every replica" in errors[0]["message"]
    assert names() == {box}  # B made none
