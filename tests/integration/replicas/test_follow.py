"""Following and steering a turn from the other replica: two real `cage serve` on one Postgres.

A turn runs on replica A; a websocket on replica B is told it is running (from the database),
replays it, follows it live (B's hub tails the log, woken by A's notices), and interrupts it (a
command A claims and carries out): the turn ends on A and B's client gets the end. A client on B
that reconnects in the middle of a turn with the last seq it had gets the rest, with no gap and no
duplicate, and the same events as the log. The hooks run in the server's process (no sandbox).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest

from tests.fakes.assistants import write_assistant
from tests.integration.replicas.conftest import HEADERS, KEY, Replicas
from tests.unit.api.wsclient import Frame, SessionClient, is_stream_end

pytestmark = [pytest.mark.docker, pytest.mark.postgres, pytest.mark.timeout(600)]

TICKER = """
from typing import Any

import anyio


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> None:
    users = [m["content"] for m in messages if m.get("role") == "user"]
    count = int(users[-1].split()[-1])
    for n in range(count):
        await ctx.send(f"tick {n}")
        await anyio.sleep(0.05)
"""
WAIT_S = 60


def _start(replicas: Replicas) -> None:
    """Start both replicas with a long lease: on a loaded machine a server can stall past the
    fixture's short one, and its turn would be closed as a dead replica's (not what these test)."""
    for replica in (replicas.a, replicas.b):
        replica.env["CAGE_REPLICA_LEASE_SECONDS"] = "120"
    replicas.start()


def _ws(url: str) -> str:
    return url.replace("http://", "ws://")


def _texts(events: list[Frame]) -> str:
    return json.dumps([e.get("props") for e in events])


async def _until_text(client: SessionClient, text: str) -> None:
    while text not in _texts(client.events):
        await client.next()


async def _error(client: SessionClient) -> Frame:
    """The next `session.error` frame."""
    while True:
        frame = await client.next()
        if frame.get("type") == "session.error":
            return frame


def _view(url: str, session: str) -> dict[str, Any]:
    reply = httpx.get(f"{url}/v1/sessions/{session}", headers=HEADERS, timeout=30)
    assert reply.status_code == 200, reply.text
    view: dict[str, Any] = reply.json()
    return view


def _log(url: str, session: str) -> list[dict[str, Any]]:
    page = httpx.get(
        f"{url}/v1/sessions/{session}/events", params={"limit": 10000}, headers=HEADERS, timeout=30
    )
    assert page.status_code == 200, page.text
    events: list[dict[str, Any]] = page.json()["events"]
    return events


def test_a_websocket_on_b_follows_a_turn_running_on_a_and_interrupts_it(replicas: Replicas) -> None:
    _start(replicas)
    session = "follow-" + uuid.uuid4().hex[:8]

    async def scenario() -> None:
        on_a = await SessionClient.open(_ws(replicas.a.url), session, KEY, assistant_id="tests.sleeper")
        ready_a = await on_a.control("session.ready")
        await on_a.send(type="user_message", text="sleep")
        accepted = await on_a.control("session.accepted")
        turn_id = accepted["turn_id"]
        await _until_text(on_a, "sleeping")

        on_b = await SessionClient.open(_ws(replicas.b.url), session, KEY, after_seq=ready_a["last_seq"])
        ready_b = await on_b.control("session.ready")
        assert ready_b["running_turn_id"] == turn_id  # B runs no turn: it asked the database
        assert _view(replicas.b.url, session)["running_turn_id"] == turn_id  # and so does its session view
        await _until_text(on_b, "sleeping")  # the replay of what A wrote

        await on_b.send(type="interrupt")
        interrupting = await on_b.control("session.interrupting")
        assert interrupting["turn_id"] == turn_id
        end_b = await on_b.until_stream_end()  # live on B: A ended the turn
        end_a = await on_a.until_stream_end()
        assert end_b["seq"] == end_a["seq"]
        assert end_b["props"]["status"] == end_a["props"]["status"] == "cancelled"
        assert [e["seq"] for e in on_b.events] == [e["seq"] for e in on_a.events]

        assert _view(replicas.b.url, session).get("running_turn_id") is None
        await on_b.send(type="interrupt")  # nothing runs any more, on either replica
        refused = await _error(on_b)
        assert refused["code"] == "no_turn", refused
        await on_a.close()
        await on_b.close()

    asyncio.run(asyncio.wait_for(scenario(), WAIT_S))
    log = _log(replicas.b.url, session)
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    assert "turn started" in replicas.a.log_text()
    assert "turn started" not in replicas.b.log_text()  # the turn ran on A only


def test_a_client_reconnecting_on_b_mid_turn_gets_the_rest_without_gap_or_duplicate(
    replicas: Replicas,
) -> None:
    write_assistant(replicas.app, "tests.ticker", hooks=TICKER)
    _start(replicas)
    session = "resume-" + uuid.uuid4().hex[:8]

    async def scenario() -> list[int]:
        on_a = await SessionClient.open(_ws(replicas.a.url), session, KEY, assistant_id="tests.ticker")
        ready_a = await on_a.control("session.ready")
        start = ready_a["last_seq"]
        await on_a.send(type="user_message", text="tick 60")
        await on_a.control("session.accepted")

        first = await SessionClient.open(_ws(replicas.b.url), session, KEY, after_seq=start)
        await first.control("session.ready")
        await _until_text(first, "tick 5")
        had = [e["seq"] for e in first.events]
        await first.close()  # the client drops mid-turn

        again = await SessionClient.open(_ws(replicas.b.url), session, KEY, after_seq=had[-1])
        await again.control("session.ready")
        await again.until_stream_end()
        await on_a.until_stream_end()
        await on_a.close()
        await again.close()
        got = had + [e["seq"] for e in again.events]
        assert got == [e["seq"] for e in on_a.events]  # what the owner's own client got
        assert any(not is_stream_end(e) and "tick 5" in json.dumps(e.get("props")) for e in first.events)
        return got

    got = asyncio.run(asyncio.wait_for(scenario(), WAIT_S))
    assert got == sorted(set(got))  # no duplicate, in order
    log = _log(replicas.a.url, session)
    assert got == [e["seq"] for e in log][-len(got) :]  # no gap: the log's tail, every seq of it
    assert got[-1] == log[-1]["seq"]


def test_the_http_interrupt_of_a_turn_id_on_b_stops_the_turn_on_a(replicas: Replicas) -> None:
    _start(replicas)
    session = "cancel-" + uuid.uuid4().hex[:8]

    async def scenario() -> None:
        on_a = await SessionClient.open(_ws(replicas.a.url), session, KEY, assistant_id="tests.sleeper")
        await on_a.control("session.ready")
        await on_a.send(type="user_message", text="sleep")
        turn_id = (await on_a.control("session.accepted"))["turn_id"]
        await _until_text(on_a, "sleeping")
        async with httpx.AsyncClient(base_url=replicas.b.url, headers=HEADERS, timeout=60) as http:
            route = f"/v1/chat/completions/{turn_id}/interrupt"
            reply = await http.post(route, json={"force": True})
            assert reply.status_code == 202, reply.text
            assert reply.json()["session_id"] == session
            end = await on_a.until_stream_end()
            assert end["props"]["status"] == "cancelled"
            again = await http.post(route, json={"force": True})  # over: refused on B as on A
            assert again.status_code == 404, again.text
            unknown = await http.post("/v1/chat/completions/turn-nope/interrupt")
            assert unknown.status_code == 404, unknown.text
        await on_a.close()

    asyncio.run(asyncio.wait_for(scenario(), WAIT_S))
