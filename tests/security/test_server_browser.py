"""M7: what a web page in the developer's browser can do to a local server.

With authentication off every caller is an admin, so a page that rebinds its own name to
127.0.0.1 must get nothing (only loopback `Host` names are answered); CORS is opt-in and names
origins; a trusted-host list refuses other `Host` headers.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from orchestrator.api import ApiConfig, create_app
from tests.unit.api.conftest import make_settings
from tests.unit.api.harness import ServerThread, create_keys, fake_services


def test_auth_off_answers_only_loopback_host_names(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, auth="off")
    server = ServerThread(create_app(settings, services=fake_services())).start()
    try:
        rebound = httpx.get(f"{server.base_url}/v1/sessions", headers={"Host": f"evil.example:{server.port}"})
        local = httpx.get(f"{server.base_url}/v1/sessions")
        named = httpx.get(f"{server.base_url}/v1/sessions", headers={"Host": f"localhost:{server.port}"})
    finally:
        server.stop()
    assert rebound.status_code == 403 and "loopback" in rebound.json()["detail"]
    assert local.status_code == 200 and named.status_code == 200


async def test_auth_off_websocket_from_a_rebound_name_is_refused(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, auth="off")
    server = ServerThread(create_app(settings, services=fake_services())).start()
    try:
        url = f"{server.ws_url}/v1/sessions/s1/ws?assistant_id=tests.echo"
        with pytest.raises(InvalidStatus) as refused:
            async with connect(url, additional_headers={"Host": "evil.example"}):
                pass
    finally:
        server.stop()
    assert refused.value.response.status_code == 403


def test_cors_is_opt_in_and_names_origins(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    create_keys(settings, {})
    preflight = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
    plain = ServerThread(create_app(settings, services=fake_services())).start()
    try:
        closed = httpx.options(f"{plain.base_url}/v1/chat/completions", headers=preflight)
    finally:
        plain.stop()
    config = ApiConfig(allowed_origins=["https://app.example"])
    opened = ServerThread(create_app(settings, services=fake_services(), config=config)).start()
    try:
        allowed = httpx.options(f"{opened.base_url}/v1/chat/completions", headers=preflight)
        other = httpx.options(
            f"{opened.base_url}/v1/chat/completions", headers={**preflight, "Origin": "https://evil.example"}
        )
    finally:
        opened.stop()
    assert "access-control-allow-origin" not in closed.headers
    assert allowed.headers["access-control-allow-origin"] == "https://app.example"
    assert "access-control-allow-origin" not in other.headers


def test_trusted_hosts_refuse_other_host_headers(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    create_keys(settings, {})
    config = ApiConfig(trusted_hosts=["cage.internal", "127.0.0.1"])
    server = ServerThread(create_app(settings, services=fake_services(), config=config)).start()
    try:
        other = httpx.get(f"{server.base_url}/healthz", headers={"Host": "evil.example"})
        ok = httpx.get(f"{server.base_url}/healthz")
    finally:
        server.stop()
    assert other.status_code == 400 and ok.status_code == 200
