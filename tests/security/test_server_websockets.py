"""M3, M7, M8, L12 and the websocket faults: attacks on a real server's session websocket and SSE.

Browser origins are refused (cross-site websocket hijacking), a revoked key loses its open
websocket and event stream within seconds, keys never need to sit in a URL (tickets), bad
parameters are answered with the field named and close code 4400, and one owner cannot hold
more connections than its cap or replay the log without limit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from orchestrator.api import ApiConfig, create_app
from orchestrator.errors import UsageError
from orchestrator.store import Store
from tests.unit.api.conftest import Served, echo_script, make_settings
from tests.unit.api.harness import ServerThread, create_keys, fake_services
from tests.unit.sandbox.fakes import FakeBackend


def serve(tmp_path: Path, **config: Any) -> Served:
    settings = make_settings(tmp_path)
    keys = create_keys(
        settings, {"admin": ("admin", "ops"), "alice": ("user", "alice"), "bob": ("user", "bob")}
    )
    backend = FakeBackend(script=echo_script)
    values: dict[str, Any] = {
        "rate_limit_per_minute": 6000,
        "rate_limit_burst": 1000,
        "revocation_check_interval": 0.3,
    }
    values.update(config)
    app = create_app(settings, services=fake_services(backend), config=ApiConfig(**values))
    return Served(server=ServerThread(app).start(), settings=settings, keys=keys, backend=backend)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    running = serve(tmp_path, allowed_origins=["https://app.example"], max_websockets_per_owner=3)
    try:
        yield running
    finally:
        running.server.stop()


async def refusal(url: str, headers: dict[str, str]) -> tuple[dict[str, Any], int]:
    """Connect, read the one frame a refused connection gets, and the close code."""
    async with connect(url, additional_headers=headers) as conn:
        frame = json.loads(await conn.recv())
        with pytest.raises(ConnectionClosed) as closed:
            await conn.recv()
    assert closed.value.rcvd is not None
    return frame, closed.value.rcvd.code


def revoke_keys_of(served: Served, owner: str) -> None:
    """Revoke `owner`'s keys in the server's own store, the way `cage keys revoke` does."""

    async def run() -> None:
        store: Store = served.server.app.state.api.services.store
        for key in await store.keys.list(owner=owner):
            await store.keys.revoke(key.id)

    served.server.call(run())


def ws_url(served: Served, session: str, query: str = "assistant_id=tests.echo") -> str:
    return f"{served.server.ws_url}/v1/sessions/{session}/ws?{query}"


async def test_a_browser_origin_websocket_is_refused(served: Served) -> None:
    evil = {**served.auth("alice"), "Origin": "https://evil.example"}
    frame, code = await refusal(ws_url(served, "s-origin"), evil)
    assert frame["code"] == "forbidden" and "origin 'https://evil.example' is not allowed" in frame["message"]
    assert code == 4403
    # the host's state: no session was created for the hijacked connection
    async with httpx.AsyncClient(base_url=served.url, headers=served.auth("alice")) as client:
        assert (await client.get("/v1/sessions/s-origin")).status_code == 404
    allowed = {**served.auth("alice"), "Origin": "https://app.example"}
    async with connect(ws_url(served, "s-origin"), additional_headers=allowed) as conn:
        assert json.loads(await conn.recv())["type"] == "session.ready"


async def test_revoking_a_key_cuts_its_open_websocket(served: Served) -> None:
    async with connect(ws_url(served, "s-revoke"), additional_headers=served.auth("alice")) as conn:
        assert json.loads(await conn.recv())["type"] == "session.ready"

        await anyio.to_thread.run_sync(revoke_keys_of, served, "alice")
        with anyio.fail_after(5):
            frame = json.loads(await conn.recv())
            with pytest.raises(ConnectionClosed) as closed:
                await conn.recv()
    assert frame == {"type": "session.error", "code": "unauthorized", "message": "API key revoked"}
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401


async def test_revoking_a_key_ends_its_event_stream(served: Served) -> None:
    async with connect(ws_url(served, "s-sse"), additional_headers=served.auth("bob")) as conn:
        await conn.recv()
    got: list[str] = []
    async with (
        httpx.AsyncClient(base_url=served.url, headers=served.auth("bob"), timeout=10) as client,
        client.stream("GET", "/v1/sessions/s-sse/stream") as response,
    ):
        assert response.status_code == 200
        await anyio.to_thread.run_sync(revoke_keys_of, served, "bob")
        with anyio.fail_after(5):
            async for line in response.aiter_lines():
                got.append(line)
    assert "event: session.error" in got and any('"unauthorized"' in line for line in got)


async def test_a_ticket_replaces_the_key_in_the_url_and_works_once(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, headers=served.auth("alice")) as client:
        issued = (await client.post("/v1/sessions/ws-ticket")).json()
    assert issued["ticket"].startswith("wst_") and issued["expires_in"] == 30.0
    url = ws_url(served, "s-ticket", f"assistant_id=tests.echo&ticket={issued['ticket']}")
    async with connect(url) as conn:
        ready = json.loads(await conn.recv())
    assert ready["type"] == "session.ready"
    frame, code = await refusal(url, {})
    assert frame["code"] == "unauthorized" and "ticket" in frame["message"] and code == 4401
    assert issued["ticket"] not in frame["message"]


@pytest.mark.parametrize(
    ("session", "query", "loc"),
    [
        ("..", "assistant_id=tests.echo", "path.session_id"),
        (".", "assistant_id=tests.echo", "path.session_id"),
        ("x" * 65, "assistant_id=tests.echo", "path.session_id"),
        ("s-bad", "assistant_id=tests.echo&after_seq=abc", "query.after_seq"),
        ("s-bad", "assistant_id=tests.echo&after_seq=-1", "query.after_seq"),
        ("s-bad", "assistant_id=tests.echo&after_seq=99", "query.after_seq"),
    ],
)
async def test_bad_parameters_are_named_and_closed_with_4400(
    served: Served, session: str, query: str, loc: str
) -> None:
    frame, code = await refusal(ws_url(served, session, query), served.auth("alice"))
    assert frame["code"] == "invalid" and code == 4400
    assert [f["loc"] for f in frame["fields"]] == [loc], frame


async def test_an_owner_holds_at_most_its_cap_of_websockets(served: Served) -> None:
    async with (
        connect(ws_url(served, "cap-1"), additional_headers=served.auth("alice")) as a,
        connect(ws_url(served, "cap-2"), additional_headers=served.auth("alice")) as b,
        connect(ws_url(served, "cap-3"), additional_headers=served.auth("alice")) as c,
    ):
        for conn in (a, b, c):
            await conn.recv()
        frame, code = await refusal(ws_url(served, "cap-4"), served.auth("alice"))
        assert (
            frame["code"] == "capacity"
            and "concurrent websocket limit reached for owner alice" in frame["message"]
        )
        assert code == 4429
        async with connect(ws_url(served, "cap-b"), additional_headers=served.auth("bob")) as other:
            assert json.loads(await other.recv())["type"] == "session.ready"  # another owner is not affected
    async with connect(ws_url(served, "cap-4"), additional_headers=served.auth("alice")) as again:
        assert json.loads(await again.recv())["type"] == "session.ready"  # closed ones were given back


async def test_resume_frames_are_rate_limited(served: Served) -> None:
    async with connect(ws_url(served, "s-resume"), additional_headers=served.auth("alice")) as conn:
        await conn.recv()
        codes = []
        for _ in range(8):
            await conn.send(json.dumps({"type": "resume", "after_seq": 0}))
            codes.append(json.loads(await conn.recv()).get("code", "ok"))
    assert codes[:5] == ["ok"] * 5 and "rate_limited" in codes[5:]


async def test_a_binary_frame_is_refused_and_the_connection_stays(served: Served) -> None:
    async with connect(ws_url(served, "s-binary"), additional_headers=served.auth("alice")) as conn:
        await conn.recv()
        await conn.send(b"\x00\x01")
        refused = json.loads(await conn.recv())
        await conn.send(json.dumps({"type": "ping"}))
        pong = json.loads(await conn.recv())
    assert refused["code"] == "unsupported" and pong["type"] == "session.pong"


def test_auth_off_is_refused_on_a_non_loopback_bind(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, auth="off", host="0.0.0.0")
    with pytest.raises(UsageError, match="CAGE_AUTH=off is only allowed on a loopback address"):
        create_app(settings, services=fake_services(FakeBackend()))
    assert create_app(
        make_settings(tmp_path / "local", auth="off", host="127.0.0.1"), services=fake_services()
    )


async def test_a_silent_event_stream_sends_keep_alive_comments(tmp_path: Path) -> None:
    running = serve(tmp_path, sse_keepalive_seconds=0.2)
    try:
        async with connect(ws_url(running, "s-quiet"), additional_headers=running.auth("alice")) as conn:
            await conn.recv()
        async with (
            httpx.AsyncClient(base_url=running.url, headers=running.auth("alice"), timeout=10) as client,
            client.stream("GET", "/v1/sessions/s-quiet/stream") as response,
        ):
            with anyio.fail_after(5):
                lines = response.aiter_lines()
                first = await anext(lines)
        assert first == ": keep-alive"
    finally:
        running.server.stop()
