"""A replica that starts as the leader while another replica runs a turn leaves that turn's box
alone: start-up reconcile removes a previous process's oneshot leftovers, never a box a live
replica's running turn is in (a rolling restart must not kill the other replicas' turns)."""

from __future__ import annotations

import uuid

import docker
import httpx
import pytest

from tests.fakes.assistants import write_assistant
from tests.integration.replicas.conftest import HEADERS, SLEEPER, Replica, Replicas, stream_turn

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
BOXED = "tests.oneshotbox"


def leads(replica: Replica) -> bool:
    return bool(httpx.get(f"{replica.url}/readyz", timeout=10).json().get("leader"))


def test_a_new_leader_spares_the_oneshot_box_of_another_replicas_running_turn(
    replicas: Replicas, docker_engine: docker.DockerClient
) -> None:
    write_assistant(
        replicas.app,
        BOXED,
        hooks=SLEEPER,
        sandbox={"version": "2.0", "runner": {"name": "claude"}, "lifecycle": "oneshot"},
    )
    # B renews its leases slowly, so it does not take the lead A gives up before C starts
    replicas.b.env.update({"CAGE_REPLICA_LEASE_SECONDS": "300", "CAGE_REPLICA_HEARTBEAT_SECONDS": "120"})
    replicas.start()
    assert leads(replicas.a) and not leads(replicas.b)
    selector = {"label": [*replicas.label_selector, f"cage.assistant={BOXED}"]}

    def names() -> set[str]:
        return {c.name for c in docker_engine.containers.list(all=True, filters=selector)}

    session = "busy-" + uuid.uuid4().hex[:8]
    started = stream_turn(replicas.b.url, session, "sleep", until="sleeping", assistant=BOXED, timeout=600)
    assert started[0]["props"]["event"] == "stream_start"
    [box] = names()  # B's turn's oneshot box

    replicas.a.stop()  # a clean stop gives up the lead
    c = Replica("c", replicas.root, {k: v for k, v in replicas.a.env.items() if k != "CAGE_DATA_DIR"})
    try:
        c.start()  # elects itself at start-up and reconciles the engine's boxes
        assert leads(c), c.log_text()[-3000:]
        assert "sandboxes reconciled" in c.log_text()
        assert box in names(), c.log_text()[-3000:]  # reconcile is done before C reports ready
        running = httpx.get(f"{replicas.b.url}/v1/sessions/{session}", headers=HEADERS, timeout=10)
        assert running.status_code == 200 and running.json().get("running_turn_id"), running.text
    finally:
        c.stop()
