"""Permission and question answers sent to replica B unblock the turn that waits for them on A.

Two real `cage serve` on one Postgres database; the turn is a real `yaocode` turn in a real box,
its model the fake model server, its policy `ask`: the bash call waits for a user's answer. A
websocket on B sees the `permission/request` (B follows A's log), answers it there, and the call
runs on A: the same `permission/resolved` as a local answer, the tool's output reaches the model,
then the agent's question is answered on B too and the answer reaches the model; the turn
completes. An answer for the same request again, now decided, is refused on B as it would be on A.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_server import FakeModelServer
from tests.integration.replicas.conftest import KEY, Replicas
from tests.integration.runners.conftest import HOST_CA
from tests.unit.api.wsclient import Frame, SessionClient

pytestmark = [pytest.mark.docker, pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(900)]

SCENARIO = "replica-ask"
STEPS: list[dict[str, Any]] = [
    {"shell": "echo answered-on-b > answered.txt && cat answered.txt"},
    {"tool": "question", "args": {"question": "Which colour?", "options": ["red", "blue"]}},
    {"text": "done"},
]
MODEL_KEY = "sk-fake-replicas-key-123456"
WAIT_S = 300


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    with FakeModelServer("text", host="0.0.0.0") as server:
        server.add_scenario(SCENARIO, STEPS)
        yield server


def _yaocode_asking(app: Path, server: FakeModelServer) -> str:
    """A session `yaocode` assistant whose policy asks before every tool call."""
    (app / "connectors").mkdir(parents=True, exist_ok=True)
    conn = {
        "label": "fake-replicas",
        "type": "anthropic",
        "options": {
            "model": f"claude-sonnet-4-5@{SCENARIO}",
            "key": "$ENV.FAKE_MODEL_KEY",
            "host": server.url,
            "max_retries": 1,
        },
    }
    (app / "connectors" / "fake-replicas.conn.yao").write_text(json.dumps(conn))
    adir = app / "assistants" / "replicas" / "asker"
    adir.mkdir(parents=True, exist_ok=True)
    (adir / "package.yao").write_text(json.dumps({"name": "asker", "connector": "fake-replicas"}))
    (adir / "prompts.yml").write_text("- role: system\n  content: You are a careful coding agent.\n")
    sandbox = {
        "version": "2.0",
        "runner": {"name": "yaocode"},
        "lifecycle": "oneshot",
        "computer": {"memory": "1GB"},
        "permissions": {"mode": "ask", "timeout": f"{WAIT_S}s"},
    }
    (adir / "sandbox.yao").write_text(json.dumps(sandbox))
    return "replicas.asker"


def _event(frame: Frame, name: str) -> bool:
    return frame.get("type") == "event" and frame["props"].get("event") == name


async def _next_event(client: SessionClient, name: str) -> Frame:
    """The first `name` event on the socket, read already (before a control frame) or still to come."""
    for frame in client.events:
        if _event(frame, name):
            return frame
    while True:
        frame = await client.next()
        if _event(frame, name):
            return frame
        if frame.get("type") == "session.error" or _event(frame, "stream_end"):
            raise AssertionError(f"waiting for {name}, got {frame}")


async def _error(client: SessionClient) -> Frame:
    while True:
        frame = await client.next()
        if frame.get("type") == "session.error":
            return frame


def test_a_permission_answer_on_b_unblocks_the_turn_on_a(
    replicas: Replicas, model_server: FakeModelServer
) -> None:
    assistant = _yaocode_asking(replicas.app, model_server)
    for replica in (replicas.a, replicas.b):
        replica.env["FAKE_MODEL_KEY"] = MODEL_KEY
        # A box's start can stall a loaded machine's server past the fixture's short lease.
        replica.env["CAGE_REPLICA_LEASE_SECONDS"] = "120"
        if Path(HOST_CA).is_file():
            replica.env.setdefault("CAGE_EXTRA_CA_CERTS", HOST_CA)
    replicas.start()
    session = "ask-" + uuid.uuid4().hex[:8]

    async def scenario() -> tuple[list[Frame], list[Frame]]:
        on_a = await SessionClient.open(
            replicas.a.url.replace("http", "ws"), session, KEY, assistant_id=assistant
        )
        await on_a.control("session.ready")
        await on_a.send(type="user_message", text="write the file")
        await on_a.control("session.accepted")

        on_b = await SessionClient.open(replicas.b.url.replace("http", "ws"), session, KEY, after_seq=0)
        await on_b.control("session.ready")
        asked = await _next_event(on_b, "permission/request")  # followed from A's log
        request_id = asked["props"]["request_id"]
        assert asked["props"]["tool"] == "bash"

        await on_b.send(type="permission_response", request_id=request_id, decision="allow")
        await on_b.control("session.ack")  # A took the answer
        resolved = await _next_event(on_b, "permission/resolved")
        assert (resolved["props"]["request_id"], resolved["props"]["decision"], resolved["props"]["by"]) == (
            request_id,
            "allow",
            "user",
        )
        question = await _next_event(on_b, "question")
        await on_b.send(type="question_response", request_id=question["props"]["request_id"], answer="blue")
        await on_b.control("session.ack")
        end_b = await on_b.until_stream_end()
        end_a = await on_a.until_stream_end()
        assert end_a["props"]["status"] == end_b["props"]["status"] == "completed"

        await on_b.send(type="permission_response", request_id=request_id, decision="deny")
        refused = await _error(on_b)  # decided already: refused as on A
        assert refused["code"] == "not_found" and request_id in refused["message"], refused
        await on_a.close()
        await on_b.close()
        return on_a.events, on_b.events

    events_a, events_b = asyncio.run(asyncio.wait_for(scenario(), WAIT_S))
    assert [e["seq"] for e in events_b] == [e["seq"] for e in events_a]
    results: list[Any] = model_server.requests.for_scenario(SCENARIO)[-1].tool_results()
    assert any("answered-on-b" in str(r) for r in results), results  # the call ran on A, after B's answer
    assert any("blue" in str(r) for r in results), results  # the question's answer, given on B
    assert "steering.done" in replicas.a.log_text()
