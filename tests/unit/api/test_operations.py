"""Health, readiness, metrics, request ids and OpenAPI on a real server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import httpx

from orchestrator.api import create_app
from orchestrator.api.metrics import Metrics
from orchestrator.pipeline.load_gate import LoadGate
from orchestrator.store import Store
from orchestrator.stream import LifecycleEvent, StreamEnd
from tests.unit.api.conftest import Served, make_settings
from tests.unit.api.harness import ServerThread, create_keys, fake_services
from tests.unit.api.wsclient import SessionClient


async def test_healthz_and_readyz_answer_ok(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url) as client:
        health = await client.get("/healthz")
        ready = await client.get("/readyz")
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert ready.status_code == 200
    body = ready.json()
    assert body.pop("replica_id")  # this process's identity among the replicas
    assert body == {"status": "ok", "database": "ok", "engine": "ok", "leader": True}


async def test_request_id_is_echoed_or_made_up(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url) as client:
        given = await client.get("/healthz", headers={"X-Request-Id": "req-42"})
        made = await client.get("/healthz")
        bogus = await client.get("/healthz", headers={"X-Request-Id": "bad id with spaces"})
    assert given.headers["x-request-id"] == "req-42"
    assert len(made.headers["x-request-id"]) == 32
    assert bogus.headers["x-request-id"] != "bad id with spaces"


async def test_metrics_are_prometheus_text(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url) as client:
        await client.get("/healthz")
        text = (await client.get("/metrics")).text
    assert 'cage_http_requests_total{method="GET",route="/healthz",status="200"}' in text
    assert 'cage_sandboxes{state="idle"} 0.0' in text
    assert "cage_websocket_clients 0.0" in text


async def test_the_door_of_root_turns_is_on_metrics() -> None:
    """Zero without a pipeline (the fake one has no door); the door's own figures once watched."""
    metrics = Metrics()
    assert "cage_turn_gate_waiting 0.0" in metrics.render().decode()
    gate = LoadGate(floor=3, interval=60.0)
    releases = [await gate.enter() for _ in range(3)]
    with anyio.move_on_after(0.01):
        await gate.enter()  # waits, then gives up
    metrics.watch_gate(gate)
    text = metrics.render().decode()
    for line in (
        "cage_turn_gate_limit 3.0",
        "cage_turn_gate_running 3.0",
        "cage_turn_gate_waiting 0.0",
        "cage_turn_gate_waited_total 1.0",
        "cage_turn_gate_refused_total 0.0",
    ):
        assert line in text
    for release in releases:
        release()
    gate.close()


async def test_openapi_lists_the_routes(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url) as client:
        spec = (await client.get("/openapi.json")).json()
        docs = await client.get("/docs")
    assert docs.status_code == 200
    for path in (
        "/v1/chat/completions",
        "/v1/models",
        "/v1/admin/assistants",
        "/v1/admin/sandboxes/{name}/exec",
        "/v1/assistants/{assistant_id}/stream",
        "/v1/sessions/{session_id}/events",
        "/readyz",
    ):
        assert path in spec["paths"], path
    assert "HTTPBearer" in spec["components"]["securitySchemes"]


async def test_shutdown_ends_running_turns_with_stream_end_cancelled(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    keys = create_keys(settings, {"alice": ("user", "alice")})
    server = ServerThread(create_app(settings, services=fake_services())).start()
    ws = await SessionClient.open(server.ws_url, "long", keys["alice"], assistant_id="tests.echo")
    await ws.control("session.ready")
    await ws.send(type="user_message", text="slow 1000 0.05")
    await ws.control("session.accepted")
    await ws.until_seq(3)
    await asyncio.to_thread(server.stop)
    async with Store.from_settings(settings) as store:
        session = await store.sessions.find("alice", "long")
        assert session is not None
        events = await store.events.after(session.id)
    last = events[-1]
    assert isinstance(last, LifecycleEvent) and isinstance(last.props, StreamEnd)
    assert last.props.status == "cancelled"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


async def test_out_of_range_numbers_are_422_not_500(served: Served) -> None:
    huge = 2**70
    async with httpx.AsyncClient(base_url=served.url, headers=served.auth("alice")) as client:
        await client.post(
            "/v1/assistants/tests.echo/stream", json={"messages": [{"content": "hi"}], "session_id": "n1"}
        )
        events = await client.get("/v1/sessions/n1/events", params={"after_seq": huge})
        tokens = await client.post(
            "/v1/chat/completions",
            json={"model": "tests.echo", "messages": [{"role": "user", "content": "x"}], "max_tokens": huge},
        )
        ttl = await client.put("/v1/memory/k", json={"value": 1, "ttl_seconds": 1e300})
    assert events.status_code == 422 and events.json()["fields"][0]["loc"] == "query.after_seq"
    assert tokens.status_code == 422 and tokens.json()["error"]["param"] == "body.max_tokens"
    assert ttl.status_code == 422
