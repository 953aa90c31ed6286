"""M6: one owner's share of a real server (uvicorn, SQLite, fake engine and turns) is capped.

Past `CAGE_MAX_EVENT_STREAMS_PER_OWNER` SSE follows, `CAGE_MAX_TURNS_PER_OWNER` running turns
(one process: the server's own count) or `CAGE_MAX_SESSIONS_PER_OWNER` sessions the owner is refused
with 429 and the error's code (close 4429 on a websocket); another owner is still served, and
what the owner gave back (a closed stream, an ended turn) is room again. The websocket cap is in
`test_server_websockets.py`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from websockets.asyncio.client import connect

from orchestrator.api.openai_compat import TURN_HEADER
from tests.security.test_server_websockets import refusal, serve, ws_url
from tests.unit.api.conftest import Served


@asynccontextmanager
async def serving(tmp_path: Path, **config: Any) -> AsyncIterator[Served]:
    running = serve(tmp_path, **config)
    try:
        yield running
    finally:
        running.server.stop()


async def open_session(served: Served, who: str, session: str) -> None:
    """Create `who`'s session `session` the way a client does: a websocket that names the assistant."""
    async with connect(ws_url(served, session), additional_headers=served.auth(who)) as conn:
        assert json.loads(await conn.recv())["type"] == "session.ready"


def turn(session: str, text: str) -> dict[str, Any]:
    return {"session_id": session, "messages": [{"role": "user", "content": text}]}


async def test_an_owners_event_streams_past_its_cap_are_refused(tmp_path: Path) -> None:
    async with serving(tmp_path, max_event_streams_per_owner=2) as served:
        await open_session(served, "alice", "s-follow")
        await open_session(served, "bob", "s-bob")
        async with (
            httpx.AsyncClient(base_url=served.url, headers=served.auth("alice"), timeout=10) as alice,
            httpx.AsyncClient(base_url=served.url, headers=served.auth("bob"), timeout=10) as bob,
        ):
            async with (
                alice.stream("GET", "/v1/sessions/s-follow/stream") as first,
                alice.stream("GET", "/v1/sessions/s-follow/stream") as second,
            ):
                assert first.status_code == second.status_code == 200
                refused = await alice.get("/v1/sessions/s-follow/stream")
                assert refused.status_code == 429, refused.text
                body = refused.json()
                assert body["code"] == "owner_cap_reached"
                assert "concurrent event stream limit reached for owner alice: at most 2" in body["detail"]
                async with bob.stream("GET", "/v1/sessions/s-bob/stream") as others:
                    assert others.status_code == 200  # another owner is not affected
            async with alice.stream("GET", "/v1/sessions/s-follow/stream") as again:
                assert again.status_code == 200  # the closed follows were given back


async def test_an_owners_running_turns_past_its_cap_are_refused(tmp_path: Path) -> None:
    """One process on SQLite: the server's own count (the fleet count is `test_leases.py`'s)."""
    async with (
        serving(tmp_path, max_turns_per_owner=2) as served,
        httpx.AsyncClient(base_url=served.url, headers=served.auth("alice"), timeout=30) as alice,
        httpx.AsyncClient(base_url=served.url, headers=served.auth("bob"), timeout=30) as bob,
    ):
        route = "/v1/assistants/tests.echo/stream"
        long = "slow 600 0.1"  # a minute of chunks: running throughout, ended by the interrupt below
        async with (
            alice.stream("POST", route, json=turn("t-1", long)) as first,
            alice.stream("POST", route, json=turn("t-2", long)) as second,
        ):
            assert first.status_code == second.status_code == 200
            refused = await alice.post(route, json=turn("t-3", long))
            assert refused.status_code == 429, refused.text
            body = refused.json()
            assert body["code"] == "owner_cap_reached"
            assert "concurrent running turn limit reached for owner alice: at most 2" in body["detail"]
            assert (await alice.get("/v1/sessions/t-3")).json()["last_seq"] == 0  # no turn ran there
            other = await bob.post(route, json=turn("t-bob", "hello"))
            assert other.status_code == 200 and "echo: hello" in other.text  # another owner's turn runs

            interrupted = await alice.post(f"/v1/chat/completions/{first.headers[TURN_HEADER]}/interrupt")
            assert interrupted.status_code == 202
            events = [json.loads(line[6:]) async for line in first.aiter_lines() if line.startswith("data: ")]
            assert (
                events[-1]["props"]["event"] == "stream_end" and events[-1]["props"]["status"] == "cancelled"
            )
            for _ in range(200):  # the ended turn's slot comes back once the server has seen its end
                room = await alice.post(route, json=turn("t-3", "hello"))
                if room.status_code != 429:
                    break
                await anyio.sleep(0.05)
            assert room.status_code == 200 and "echo: hello" in room.text
            await alice.post(f"/v1/chat/completions/{second.headers[TURN_HEADER]}/interrupt")


async def test_an_owners_sessions_past_its_cap_are_refused_on_http_and_websocket(tmp_path: Path) -> None:
    async with (
        serving(tmp_path, max_sessions_per_owner=3) as served,
        httpx.AsyncClient(base_url=served.url, headers=served.auth("alice"), timeout=30) as alice,
    ):
        route = "/v1/assistants/tests.echo/stream"
        await open_session(served, "alice", "c-1")
        await open_session(served, "alice", "c-2")
        assert (await alice.post(route, json=turn("c-3", "hello"))).status_code == 200

        refused = await alice.post(route, json=turn("c-4", "hello"))
        assert refused.status_code == 429, refused.text
        assert refused.json()["code"] == "owner_sessions_full"
        assert "session limit reached for owner alice: at most 3" in refused.json()["detail"]
        frame, code = await refusal(ws_url(served, "c-5"), served.auth("alice"))
        assert frame["code"] == "capacity" and "session limit reached for owner alice" in frame["message"]
        assert code == 4429
        listed = (await alice.get("/v1/sessions")).json()
        assert sorted(s["id"] for s in listed) == ["c-1", "c-2", "c-3"]  # nothing was created

        again = await alice.post(route, json=turn("c-1", "again"))  # its existing sessions still work
        assert again.status_code == 200 and "echo: again" in again.text
        await open_session(served, "bob", "c-4")  # another owner has its own count

        assert (await alice.delete("/v1/sessions/c-2")).status_code == 204
        room = await alice.post(route, json=turn("c-4", "hello"))  # a deleted session makes room
        assert room.status_code == 200 and "echo: hello" in room.text
