"""The leader reaps for the whole fleet: a box another replica made is reaped by the leader once no
replica has used it for its `idle_timeout`, and a box another replica's turn is in is left alone."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import docker
import httpx
import pytest

from tests.fakes.assistants import write_assistant
from tests.integration.replicas.conftest import SLEEPER, Replica, Replicas, stream_turn

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
BOXED = "tests.idlebox"
IDLE = 3.0


def eventually(what: str, probe: Callable[[], Any], timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.25)
    raise AssertionError(f"not seen within {timeout:g}s: {what}")


def sweeps(replica: Replica) -> float:
    text = httpx.get(f"{replica.url}/metrics", timeout=10).text
    match = re.search(r'^cage_maintenance_runs_total\{job="reaper"\} (\S+)$', text, re.M)
    assert match, text[-2000:]
    return float(match.group(1))


def test_the_leader_reaps_the_other_replicas_idle_box_and_spares_its_busy_one(
    replicas: Replicas, docker_engine: docker.DockerClient
) -> None:
    write_assistant(
        replicas.app,
        BOXED,
        hooks=SLEEPER,
        sandbox={
            "version": "2.0",
            "runner": {"name": "claude"},
            "lifecycle": "session",
            "idle_timeout": f"{IDLE:g}s",
        },
    )
    replicas.start()  # A leads; B only serves
    selector = {"label": [*replicas.label_selector, f"cage.assistant={BOXED}"]}

    def names() -> set[str]:
        # the list endpoint's own names: `containers.list` inspects every container it lists, and
        # one the reaper removes in between fails that inspect (NotFound)
        listed = docker_engine.api.containers(all=True, filters=selector)
        return {name.lstrip("/") for container in listed for name in container["Names"]}

    busy = stream_turn(
        replicas.b.url,
        "busy-" + uuid.uuid4().hex[:8],
        "sleep",
        until="sleeping",
        assistant=BOXED,
        timeout=600,
    )
    assert busy[0]["props"]["event"] == "stream_start"
    [busy_box] = names()
    done = stream_turn(replicas.b.url, "idle-" + uuid.uuid4().hex[:8], "hello", assistant=BOXED, timeout=600)
    assert done[-1]["props"]["event"] == "stream_end"  # (the runner after the hook has no model: error)
    [idle_box] = names() - {busy_box}  # both made by B, one per session

    eventually("the idle box reaped by the leader", lambda: idle_box not in names())
    eventually("the leader's log line", lambda: "sandbox reaped" in replicas.a.log_text())
    assert "sandbox reaped" not in replicas.b.log_text()  # B does not lead: it never reaps

    later = sweeps(replicas.a) + 2 * IDLE  # a sweep a second: well past the busy box's idle timeout
    eventually("more sweeps of the leader", lambda: sweeps(replicas.a) >= later)
    assert busy_box in names()  # B's turn is in it: the leader left it alone
    assert sweeps(replicas.b) == 0
