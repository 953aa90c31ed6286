"""`agent.yml` `store.ttl` has an effect: a real server's retention deletes sessions idle that long
(uvicorn, SQLite), unless `CAGE_SESSION_TTL_SECONDS` is set, which wins."""

from __future__ import annotations

import concurrent.futures
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import httpx
import pytest

from orchestrator.api import ApiConfig, create_app
from orchestrator.store import Store
from tests.unit.api.conftest import make_settings
from tests.unit.api.harness import ServerThread, create_keys, fake_services, wait_for


def write_idle_session(store_url: str, client_id: str) -> None:
    """`alice`'s session `client_id`, last active two hours ago."""

    async def write() -> None:
        two_hours_ago = datetime.now(UTC) - timedelta(hours=2)
        async with Store.from_url(store_url, clock=lambda: two_hours_ago) as store:
            await store.sessions.create("alice", "tests.echo", client_id=client_id)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(anyio.run, write).result()


@pytest.mark.parametrize(("session_ttl", "expired"), [(None, True), (3 * 3600.0, False)])
def test_agent_store_ttl_expires_idle_sessions(
    tmp_path: Path, session_ttl: float | None, expired: bool
) -> None:
    settings = make_settings(tmp_path)
    (settings.app_dir / "agent.yml").write_text("store:\n  ttl: 3600\n")
    keys = create_keys(settings, {"alice": ("user", "alice")})
    write_idle_session(settings.resolved_database_url(), "idle")
    config = ApiConfig(retention_interval=0.1, session_ttl_seconds=session_ttl)
    server = ServerThread(create_app(settings, services=fake_services(), config=config)).start()
    try:
        headers = {"Authorization": f"Bearer {keys['alice']}"}
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=10) as client:
            turn = {"session_id": "fresh", "messages": [{"role": "user", "content": "hi"}]}
            assert client.post("/v1/assistants/tests.echo/stream", json=turn).status_code == 200
            runs = server.app.state.cluster.runs
            start = runs["retention"]
            wait_for(lambda: runs["retention"] >= start + 2, timeout=20)  # two whole sweeps since
            idle = client.get("/v1/sessions/idle").status_code
            fresh = client.get("/v1/sessions/fresh").status_code
    finally:
        server.stop()
    assert idle == (404 if expired else 200)  # idle 2 h: past store.ttl (1 h), within the setting's 3 h
    assert fresh == 200
