"""Replica leases on a real pair of `cage serve` processes: one leader runs the upkeep, a replica
killed mid-turn is noticed by the other once its lease runs out (the turn is closed as after a crash
and the next message is served), and a second server on one SQLite file is refused."""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestrator.store.server_lock import ServerLock
from tests.fakes.assistants import make_app, write_assistant
from tests.integration.replicas.conftest import HEADERS, KEY, SLEEPER, Replica, Replicas, stream_turn

pytestmark = pytest.mark.timeout(600)


def eventually(what: str, probe: Callable[[], Any], timeout: float = 90.0) -> Any:
    """Poll `probe` until it returns something truthy; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.25)
    raise AssertionError(f"not seen within {timeout:g}s: {what}")


def maintenance_runs(replica: Replica, job: str) -> float:
    text = httpx.get(f"{replica.url}/metrics", timeout=10).text
    match = re.search(rf'^cage_maintenance_runs_total{{job="{job}"}} (\S+)$', text, re.M)
    assert match, text[-2000:]
    return float(match.group(1))


def ready(replica: Replica) -> dict[str, Any]:
    body: dict[str, Any] = httpx.get(f"{replica.url}/readyz", timeout=30).json()
    return body


def test_the_reaper_runs_on_the_elected_replica_only(replicas: Replicas) -> None:
    replicas.start()
    a, b = ready(replicas.a), ready(replicas.b)
    assert a["replica_id"] and b["replica_id"] and a["replica_id"] != b["replica_id"]
    assert a["leader"] is True and b["leader"] is False  # A started first and took the lead

    eventually("three reaper sweeps on A", lambda: maintenance_runs(replicas.a, "reaper") >= 3)
    assert maintenance_runs(replicas.b, "reaper") == 0
    assert maintenance_runs(replicas.b, "volume-gc") == 0
    assert "replica leads the cluster's upkeep" in replicas.a.log_text()
    assert "replica leads the cluster's upkeep" not in replicas.b.log_text()
    assert a["replica_id"] in replicas.a.log_text()  # the identity is in the start-up log


def test_kill_9_of_a_replica_mid_turn_and_the_other_closes_the_turn_and_serves_the_next(
    replicas: Replicas,
) -> None:
    replicas.start()
    session = "lease-" + uuid.uuid4().hex[:8]
    seen = stream_turn(replicas.a.url, session, "sleep", until="sleeping")
    assert seen[0]["props"]["event"] == "stream_start"

    body = {"session_id": session, "messages": [{"role": "user", "content": "me too"}]}
    busy = httpx.post(
        f"{replicas.b.url}/v1/assistants/tests.sleeper/stream", json=body, headers=HEADERS, timeout=30
    )
    assert busy.status_code == 409 and "already running" in busy.text  # A's turn, seen from B

    replicas.a.kill9()

    def closed() -> list[dict[str, Any]] | None:
        page = httpx.get(f"{replicas.b.url}/v1/sessions/{session}/events", headers=HEADERS, timeout=10).json()
        log: list[dict[str, Any]] = page["events"]
        end = log[-1]
        done = end["props"].get("event") == "stream_end" and not end.get("thread_id")
        return log if done else None

    log = eventually("the dead replica's turn closed by B", closed)
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    assert log[-1]["props"]["status"] == "error"
    errors = [e for e in log if e["type"] == "error"]
    assert [e["props"]["code"] for e in errors] == ["orchestrator_restarted"]
    # B logs the take-over once the turn is closed, so the log line may come just after the events
    eventually("B's log of the take-over", lambda: "turns of a dead replica closed" in replicas.b.log_text())
    assert ready(replicas.b)["leader"] is True  # B took the lead when A's lease ran out

    after = stream_turn(replicas.b.url, session, "hello")
    assert after[-1]["props"]["event"] == "stream_end" and after[-1]["props"]["status"] == "completed"
    texts = " ".join(str(e["props"].get("content", "")) for e in after)
    assert "awake: hello (user messages seen: 2)" in texts  # the killed turn's message was kept


def test_a_second_server_on_one_sqlite_database_is_refused(tmp_path: Path) -> None:
    app = make_app(tmp_path / "app")
    write_assistant(app, "tests.sleeper", hooks=SLEEPER)
    env = {
        **os.environ,
        "CAGE_APP_DIR": str(app),
        "CAGE_BOOTSTRAP_ADMIN_KEY": KEY,
        "CAGE_SANDBOX_LABELS": '{"cage.test-sqlite": "' + uuid.uuid4().hex + '"}',
        "CAGE_LOG_LEVEL": "INFO",
    }
    env.pop("CAGE_DATABASE_URL", None)
    first = Replica("first", tmp_path, env)
    second = Replica("second", tmp_path, env)
    second.env["CAGE_DATA_DIR"] = first.env["CAGE_DATA_DIR"]
    try:
        first.start()
        second.launch()
        assert second.proc is not None
        code = second.proc.wait(120)
        database = Path(first.env["CAGE_DATA_DIR"]) / "cage.db"
        message = second.log_text()
        assert code == 2, message
        assert f"database {database.resolve()} is in use by another cage serve" in message
        assert first.proc is not None and f"pid {first.proc.pid}" in message
        assert "Traceback" not in message
        assert httpx.get(f"{first.url}/healthz", timeout=10).status_code == 200  # the first goes on

        first.kill9()  # returns once the server, and anything it started, is gone
        probe = ServerLock(database.resolve())
        probe.acquire()  # the lock died with its process (else: refused, naming the holder)
        probe.release()
        second.start()  # so a restart right away is never refused
    finally:
        first.stop()
        second.stop()
