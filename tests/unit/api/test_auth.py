"""Authentication, roles, ownership and the caps, on a real server with a real SQLite key store."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import httpx
import pytest

from orchestrator.api import ApiConfig, create_app
from orchestrator.dsl import AppLoader
from orchestrator.logs import configure_logging
from orchestrator.sandbox import SandboxRequest
from orchestrator.store.sessions import internal_session_id
from tests.unit.api.conftest import Served, make_settings
from tests.unit.api.harness import BOOTSTRAP_KEY, ServerThread, create_keys, fake_services


async def test_no_key_is_401_with_a_bearer_challenge(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url) as client:
        missing = await client.get("/v1/sessions")
        wrong = await client.get(
            "/v1/sessions", headers={"Authorization": "Bearer cage_000000000000_" + "x" * 43}
        )
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["error"] == "Unauthorized"
    assert wrong.status_code == 401 and "invalid or revoked" in wrong.json()["detail"]


async def test_user_key_on_admin_routes_is_403(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, headers=served.auth("alice")) as client:
        for path in ("/v1/admin/assistants", "/v1/admin/sandboxes", "/v1/admin/audit", "/v1/admin/runners"):
            response = await client.get(path)
            assert response.status_code == 403, path
            assert response.json() == {
                "error": "Forbidden",
                "code": "forbidden",
                "detail": "this route needs an admin API key",
            }
    async with httpx.AsyncClient(base_url=served.url, headers=served.auth("admin")) as client:
        assert (await client.get("/v1/admin/assistants")).status_code == 200


async def test_another_users_session_is_404_like_a_missing_one(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url) as client:
        created = await client.post(
            "/v1/assistants/tests.echo/stream",
            json={"messages": [{"role": "user", "content": "hi"}], "session_id": "alice-session"},
            headers=served.auth("alice"),
        )
        assert created.status_code == 200
        mine = await client.get("/v1/sessions/alice-session", headers=served.auth("alice"))
        theirs = await client.get("/v1/sessions/alice-session", headers=served.auth("bob"))
        missing = await client.get("/v1/sessions/nobody-session", headers=served.auth("bob"))
        events = await client.get("/v1/sessions/alice-session/events", headers=served.auth("bob"))
        hijack = await client.post(
            "/v1/assistants/tests.echo/stream",
            json={"messages": [{"role": "user", "content": "mine now"}], "session_id": "alice-session"},
            headers=served.auth("bob"),
        )
        deleted = await client.delete("/v1/sessions/alice-session", headers=served.auth("bob"))
        admin = await client.get(
            "/v1/admin/sessions/alice-session", params={"owner": "alice"}, headers=served.auth("admin")
        )
        still_mine = await client.get("/v1/sessions/alice-session/events", headers=served.auth("alice"))
    assert mine.status_code == 200 and mine.json()["owner"] == "alice"
    assert theirs.status_code == 404 and theirs.json()["detail"] == "session 'alice-session' not found"
    assert missing.status_code == 404 and missing.json()["detail"] == theirs.json()["detail"].replace(
        "alice-session", "nobody-session"
    )
    assert events.status_code == 404
    # session ids are per owner: bob's "alice-session" is bob's own new session, alice's is untouched
    assert hijack.status_code == 200 and deleted.status_code == 204
    assert admin.status_code == 200 and admin.json()["last_seq"] > 0
    assert "mine now" in hijack.text and still_mine.status_code == 200 and "mine now" not in still_mine.text


async def test_bootstrap_key_works_until_an_admin_key_exists(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    create_keys(settings, {"alice": ("user", "alice")})
    server = ServerThread(create_app(settings, services=fake_services())).start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            boot = {"Authorization": f"Bearer {BOOTSTRAP_KEY}"}
            assert (await client.get("/v1/admin/assistants", headers=boot)).status_code == 200
            create_keys(settings, {"root": ("admin", "ops")})
            refused = await client.get("/v1/admin/assistants", headers=boot)
    finally:
        server.stop()
    assert refused.status_code == 401


async def test_per_key_rate_limit_answers_429_with_retry_after(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    keys = create_keys(settings, {"alice": ("user", "alice"), "bob": ("user", "bob")})
    config = ApiConfig(rate_limit_per_minute=6, rate_limit_burst=3)
    server = ServerThread(create_app(settings, services=fake_services(), config=config)).start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            alice = {"Authorization": f"Bearer {keys['alice']}"}
            codes = [(await client.get("/v1/sessions", headers=alice)).status_code for _ in range(5)]
            limited = await client.get("/v1/sessions", headers=alice)
            bob = await client.get("/v1/sessions", headers={"Authorization": f"Bearer {keys['bob']}"})
            metrics = (await client.get("/metrics")).text
    finally:
        server.stop()
    assert codes == [200, 200, 200, 429, 429]
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    assert limited.json()["error"] == "KeyRateLimited"
    assert bob.status_code == 200  # the limit is per key
    assert "cage_rate_limited_total 3.0" in metrics


async def test_sandbox_cap_per_owner_answers_429(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, headers=served.auth("alice")) as client:
        first = await client.post(
            "/v1/chat/completions",
            json={"model": "tests.box", "messages": [{"role": "user", "content": "one"}]},
            headers={"X-Cage-Session-Id": "box-1"},
        )
        assert first.status_code == 200
        # the fake pipeline takes no sandbox, so occupy alice's only slot the way a turn would
        _occupy_slot(served, owner="alice", session_id="box-1")
        second = await client.post(
            "/v1/chat/completions",
            json={"model": "tests.box", "messages": [{"role": "user", "content": "two"}]},
            headers={"X-Cage-Session-Id": "box-2"},
        )
        same_session = await client.post(
            "/v1/chat/completions",
            json={"model": "tests.box", "messages": [{"role": "user", "content": "again"}]},
            headers={"X-Cage-Session-Id": "box-1"},
        )
    bob = await _post_as(served, "bob", "box-3")
    assert second.status_code == 429
    assert second.json()["error"] == {
        "message": "sandbox limit reached for owner alice: at most 1",
        "type": "CapacityError",
        "param": None,
        "code": "capacity_reached",
    }
    assert same_session.status_code == 200  # reuses the session's sandbox: no new one needed
    assert bob == 200


async def _post_as(served: Served, who: str, session_id: str) -> int:
    async with httpx.AsyncClient(base_url=served.url, headers=served.auth(who)) as client:
        response = await client.post(
            "/v1/chat/completions",
            json={"model": "tests.box", "messages": [{"role": "user", "content": "x"}]},
            headers={"X-Cage-Session-Id": session_id},
        )
    return response.status_code


def _occupy_slot(served: Served, *, owner: str, session_id: str) -> None:
    """Create the session's sandbox through the app's own manager, the way a sandbox turn does
    (turns name their sandbox after the internal session id)."""
    manager = served.server.app.state.api.services.manager
    assistant = AppLoader(served.settings.app_dir, environ={}).get("tests.box")
    assert assistant.sandbox is not None
    request = SandboxRequest(
        owner=owner,
        assistant_id="tests.box",
        assistant_dir=assistant.path,
        spec=assistant.sandbox,
        session_id=internal_session_id(owner, session_id),
    )
    lease = served.server.call(manager.acquire(request))
    served.server.call(manager.release(lease))


@pytest.mark.parametrize("bad", ["Basic YWxpY2U6cHc=", "Bearer", "cage_abc"])
async def test_malformed_authorization_is_401(served: Served, bad: str) -> None:
    async with httpx.AsyncClient(base_url=served.url) as client:
        response = await client.get("/v1/sessions", headers={"Authorization": bad})
    assert response.status_code == 401


async def test_keys_never_reach_the_logs(served: Served) -> None:
    stream = io.StringIO()
    configure_logging("DEBUG", stream=stream, json=True)
    for client_logger in ("httpx", "httpcore"):  # the test's own client logs its URLs; not the server
        logging.getLogger(client_logger).setLevel(logging.WARNING)
    try:
        async with httpx.AsyncClient(base_url=served.url) as client:
            await client.get("/v1/sessions", headers=served.auth("alice"))
            await client.get("/v1/sessions?token=" + served.keys["bob"], headers=served.auth("alice"))
            await client.get("/v1/sessions", headers={"Authorization": "Bearer " + served.keys["bob"] + "x"})
    finally:
        configure_logging("WARNING")
    logged = stream.getvalue()
    assert '"route": "/v1/sessions"' in logged
    for token in served.keys.values():
        assert token not in logged
    assert served.keys["bob"].split("_", 2)[2] not in logged  # the secret part (it may hold "_")
