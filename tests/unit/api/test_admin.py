"""The admin API on a real server: assistants, sandboxes, images, runners, sessions, audit."""

from __future__ import annotations

import json

import httpx
import pytest

from orchestrator.dsl import AppLoader
from orchestrator.sandbox import SandboxRequest
from tests.unit.api.conftest import Served

NEW = {
    "id": "api.helper",
    "package": {"name": "Helper", "description": "made over the API"},
    "prompts": [{"role": "system", "content": "Be brief."}],
}


@pytest.fixture
async def admin(served: Served) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=served.url, headers=served.auth("admin"), timeout=10)


def box_for(served: Served, owner: str, session_id: str) -> str:
    """A session sandbox made by the app's manager (as a sandbox turn would); returns its name."""
    manager = served.server.app.state.api.services.manager
    assistant = AppLoader(served.settings.app_dir, environ={}).get("tests.box")
    assert assistant.sandbox is not None
    request = SandboxRequest(
        owner=owner,
        assistant_id="tests.box",
        assistant_dir=assistant.path,
        spec=assistant.sandbox,
        session_id=session_id,
    )
    lease = served.server.call(manager.acquire(request))
    served.server.call(manager.release(lease))
    return lease.identity.name


async def test_assistants_file_and_system_are_read_only_api_ones_are_stored(
    served: Served, admin: httpx.AsyncClient
) -> None:
    async with admin:
        listed = (await admin.get("/v1/admin/assistants")).json()
        created = await admin.post("/v1/admin/assistants", json=NEW)
        again = await admin.post("/v1/admin/assistants", json=NEW)
        updated = await admin.put(
            "/v1/admin/assistants/api.helper", json={**NEW, "package": {"name": "Helper 2"}} | {"id": None}
        )
        fetched = (await admin.get("/v1/admin/assistants/api.helper")).json()
        file_put = await admin.put("/v1/admin/assistants/tests.echo", json={"package": {"name": "x"}})
        file_new = await admin.post("/v1/admin/assistants", json={**NEW, "id": "tests.echo"})
        system_del = await admin.delete("/v1/admin/assistants/__yao.loop_fallback")
        bad = await admin.post(
            "/v1/admin/assistants",
            json={"id": "api.bad", "package": {"description": "no name"}, "sandbox": {}},
        )
        models = (await admin.get("/v1/models")).json()["data"]
        deleted = await admin.delete("/v1/admin/assistants/api.helper")
        gone = await admin.get("/v1/admin/assistants/api.helper")
        reloaded = (await admin.post("/v1/admin/assistants/reload")).json()
        audit = (await admin.get("/v1/admin/audit", params={"target": "api.helper"})).json()
    by_id = {a["id"]: a for a in listed}
    assert by_id["tests.echo"]["source"] == "file" and by_id["tests.echo"]["readonly"] is True
    assert by_id["tests.box"]["runner"] == "tai" and by_id["tests.box"]["mode"] == "runner"
    assert by_id["__yao.loop_fallback"]["source"] == "system"
    assert (
        created.status_code == 201
        and created.json()["source"] == "api"
        and created.json()["readonly"] is False
    )
    assert again.status_code == 409
    assert updated.status_code == 422  # PUT bodies carry no id
    assert fetched["name"] == "Helper" and fetched["prompts"] == NEW["prompts"]
    assert file_put.status_code == 409 and "defined by files" in file_put.json()["detail"]
    assert file_new.status_code == 409
    assert system_del.status_code == 403 and "system assistant" in system_del.json()["detail"]
    assert bad.status_code == 422
    assert "package.name" in bad.json()["detail"] and "sandbox.version" in bad.json()["detail"]
    assert "api.helper" in [m["id"] for m in models]
    assert deleted.status_code == 204 and gone.status_code == 404
    assert "tests.echo" in reloaded["assistants"]
    assert [e["action"] for e in audit] == ["assistant.delete", "assistant.create"]
    assert all(e["actor"].startswith("key_") for e in audit)


async def test_assistant_update_replaces_the_documents(admin: httpx.AsyncClient) -> None:
    async with admin:
        await admin.post("/v1/admin/assistants", json=NEW)
        body = {
            "package": {"name": "Helper 2"},
            "prompts": [],
            "sandbox": {"version": "2.0", "runner": {"name": "codex"}},
        }
        updated = await admin.put("/v1/admin/assistants/api.helper", json=body)
    assert updated.status_code == 200
    assert updated.json()["name"] == "Helper 2" and updated.json()["runner"] == "codex"


async def test_sandboxes_list_get_exec_stop_delete_and_owner_scoping(
    served: Served, admin: httpx.AsyncClient
) -> None:
    mine = box_for(served, "alice", "c1")
    theirs = box_for(served, "bob", "c2")
    async with admin, httpx.AsyncClient(base_url=served.url, headers=served.auth("alice")) as alice:
        everything = (await admin.get("/v1/admin/sandboxes")).json()
        bobs = (await admin.get("/v1/admin/sandboxes", params={"owner": "bob"})).json()
        own = (await alice.get("/v1/sandboxes")).json()
        peek = await alice.get(f"/v1/sandboxes/{theirs}")
        kill = await alice.delete(f"/v1/sandboxes/{theirs}")
        detail = (await admin.get(f"/v1/admin/sandboxes/{mine}")).json()
        ran = (await admin.post(f"/v1/admin/sandboxes/{mine}/exec", json={"argv": ["echo", "hi"]})).json()
        failed = (await admin.post(f"/v1/admin/sandboxes/{mine}/exec", json={"argv": ["false"]})).json()
        empty = await admin.post(f"/v1/admin/sandboxes/{mine}/exec", json={"argv": []})
        stopped = (await admin.post(f"/v1/admin/sandboxes/{mine}/stop")).json()
        removed = await alice.delete(f"/v1/sandboxes/{mine}")
        missing = await admin.get(f"/v1/admin/sandboxes/{mine}")
        metrics = (await admin.get("/metrics")).text
        audit = [e["action"] for e in (await admin.get("/v1/admin/audit")).json()]
    assert {b["name"] for b in everything} == {mine, theirs}
    assert [b["owner"] for b in bobs] == ["bob"]
    assert [b["name"] for b in own] == [mine]
    assert peek.status_code == 404 and kill.status_code == 404
    assert (
        detail["status"] == "idle"
        and detail["lifecycle"] == "session"
        and detail["image"] == "cage/fake:0123456789ab"
    )
    assert detail["assistant_id"] == "tests.box" and len(detail["config_hash"]) == 64
    assert ran == {
        "exit_code": 0,
        "stdout": "echo hi\nuser=-",
        "stderr": "",
        "truncated": False,
        "timed_out": False,
    }
    assert failed["exit_code"] == 1 and failed["stderr"] == "it failed"
    assert empty.status_code == 422
    assert stopped["status"] == "stopped"
    assert removed.status_code == 204 and missing.status_code == 404
    assert mine not in served.backend.boxes and mine in served.backend.removed
    assert 'cage_sandboxes{state="idle"} 1.0' in metrics
    assert audit[:4] == ["sandbox.remove", "sandbox.stop", "sandbox.exec", "sandbox.exec"]


async def test_sandbox_gc_sweeps_idle_boxes(served: Served, admin: httpx.AsyncClient) -> None:
    name = box_for(served, "alice", "c9")
    served.server.app.state.api.services.manager.registry.get(name).last_used -= 3 * 3600  # idle for 3h
    async with admin:
        swept = (await admin.post("/v1/admin/sandboxes/gc")).json()
        after = (await admin.get("/v1/admin/sandboxes")).json()
    assert swept == [{"name": name, "action": "remove"}]
    assert after == []


async def test_images_runners_build_progress_and_prune(admin: httpx.AsyncClient) -> None:
    async with admin:
        images = await admin.get("/v1/admin/images")
        runners = (await admin.get("/v1/admin/runners")).json()
        built = await admin.post("/v1/admin/images/build", json={"runner": "tai"})
        unknown = await admin.post("/v1/admin/images/build", json={"runner": "nope"})
        pruned = (await admin.post("/v1/admin/images/prune")).json()
        metrics = (await admin.get("/metrics")).text
    assert images.status_code == 200 and images.json() == []
    assert {r["name"] for r in runners} == {"claude", "codex", "opencode", "tai", "yaocode"}
    assert all(r["available"] is False for r in runners)
    assert built.headers["content-type"].startswith("text/event-stream")
    progress = [json.loads(line[6:]) for line in built.text.splitlines() if line.startswith("data: ")]
    assert progress[-1]["phase"] == "done" and progress[-1]["tag"] == "cage/fake:0123456789ab"
    assert unknown.status_code == 400 and "unknown runner" in unknown.json()["detail"]
    assert pruned == {"removed": [], "kept_in_use": []}
    assert 'cage_image_builds_total{result="ok",runner="tai"} 1.0' in metrics


async def test_admin_sessions_of_any_owner(served: Served, admin: httpx.AsyncClient) -> None:
    async with admin, httpx.AsyncClient(base_url=served.url, headers=served.auth("bob")) as bob:
        await bob.post(
            "/v1/assistants/tests.echo/stream", json={"messages": [{"content": "hi"}], "session_id": "b1"}
        )
        listed = (await admin.get("/v1/admin/sessions", params={"owner": "bob"})).json()
        no_owner = await admin.get("/v1/admin/sessions")
        page = {"owner": "bob", "after_seq": 1, "limit": 2}
        events = (await admin.get("/v1/admin/sessions/b1/events", params=page)).json()
        unnamed = await admin.get("/v1/admin/sessions/b1")
        own = (await bob.get("/v1/sessions")).json()
        deleted = await admin.delete("/v1/admin/sessions/b1", params={"owner": "bob"})
        after = await bob.get("/v1/sessions/b1")
    assert [s["id"] for s in listed] == ["b1"] and listed[0]["owner"] == "bob"
    assert no_owner.status_code == 422 and no_owner.json()["fields"][0]["loc"] == "query.owner"
    assert [e["seq"] for e in events["events"]] == [2, 3] and events["last_seq"] == 3
    assert {e["session_id"] for e in events["events"]} == {"b1"}
    assert unnamed.status_code == 422 and unnamed.json()["fields"][0]["loc"] == "query.owner"
    assert [s["id"] for s in own] == ["b1"]
    assert deleted.status_code == 204 and after.status_code == 404
