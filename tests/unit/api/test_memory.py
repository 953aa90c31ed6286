"""Memory over the API: each owner sees only its own user memory and its own sessions' memory."""

from __future__ import annotations

import httpx

from tests.unit.api.conftest import Served


async def test_user_memory_is_per_owner(served: Served) -> None:
    async with (
        httpx.AsyncClient(base_url=served.url, headers=served.auth("alice")) as alice,
        httpx.AsyncClient(base_url=served.url, headers=served.auth("bob")) as bob,
        httpx.AsyncClient(base_url=served.url, headers=served.auth("admin")) as admin,
    ):
        put = await alice.put("/v1/memory/theme", json={"value": {"color": "dark"}})
        mine = await alice.get("/v1/memory/theme")
        keys = await alice.get("/v1/memory", params={"prefix": "th"})
        bobs = await bob.get("/v1/memory/theme")
        bob_keys = await bob.get("/v1/memory", params={"owner": "alice"})  # a user cannot pick an owner
        by_admin = await admin.get("/v1/memory/theme", params={"owner": "alice"})
        expiring = await alice.put("/v1/memory/otp", json={"value": 1, "ttl_seconds": 60})
        bad_ttl = await alice.put("/v1/memory/otp", json={"value": 1, "ttl_seconds": 0})
        deleted = await alice.delete("/v1/memory/theme")
        again = await alice.delete("/v1/memory/theme")
    assert put.status_code == 200 and put.json()["scope_id"] == "alice"
    assert mine.json()["value"] == {"color": "dark"} and mine.json()["space"] == "user"
    assert keys.json() == ["theme"]
    assert bobs.status_code == 404 and bob_keys.json() == []
    assert by_admin.status_code == 200 and by_admin.json()["value"] == {"color": "dark"}
    assert expiring.json()["expires_at"] is not None
    assert bad_ttl.status_code == 422 and bad_ttl.json()["fields"][0]["loc"] == "body.ttl_seconds"
    assert deleted.status_code == 204 and again.status_code == 404


async def test_session_memory_belongs_to_the_sessions_owner(served: Served) -> None:
    async with (
        httpx.AsyncClient(base_url=served.url, headers=served.auth("alice")) as alice,
        httpx.AsyncClient(base_url=served.url, headers=served.auth("bob")) as bob,
    ):
        await alice.post(
            "/v1/assistants/tests.echo/stream", json={"messages": [{"content": "hi"}], "session_id": "m1"}
        )
        put = await alice.put("/v1/sessions/m1/memory/step", json={"value": 3})
        listed = await alice.get("/v1/sessions/m1/memory")
        peek = await bob.get("/v1/sessions/m1/memory/step")
        write = await bob.put("/v1/sessions/m1/memory/step", json={"value": 4})
        still = await alice.get("/v1/sessions/m1/memory/step")
    assert put.status_code == 200 and put.json()["space"] == "chat" and put.json()["scope_id"] == "m1"
    assert listed.json() == ["step"]
    assert peek.status_code == 404 and write.status_code == 404
    assert still.json()["value"] == 3
