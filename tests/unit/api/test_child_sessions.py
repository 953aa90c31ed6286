"""Sub-agent child sessions over the API (real uvicorn, real SQLite store): listed under
`/v1/sessions` with their parent's id, and under `?parent=<id>` alone; their events are their own."""

from __future__ import annotations

import httpx

from orchestrator.pipeline.modes.child_sessions import StoreChildSessions
from orchestrator.store import Store
from orchestrator.stream import CountingIds, TurnBuilder
from tests.unit.api.conftest import Served


async def test_child_sessions_are_listed_under_their_parent(served: Served) -> None:
    store = Store.from_url(served.settings.resolved_database_url())
    try:
        parent = await store.sessions.create("alice", "tests.echo", client_id="p1")
        await store.sessions.create("alice", "tests.echo", client_id="unrelated")
        sessions = StoreChildSessions(
            store, owner="alice", assistant_id="tests.echo", parent_session_id=parent.id, turn_id="turn-1"
        )
        child = await sessions.open("docs", "read the docs")
        builder = TurnBuilder(CountingIds())
        await child.emit([*builder.stream_start("agent", session_id=child.id), *builder.text("report")])
        await child.emit([*builder.close_open_messages(), *builder.stream_end("completed")])
        await sessions.open("task-2", "look at the tests")
    finally:
        await store.aclose()
    async with (
        httpx.AsyncClient(base_url=served.url, headers=served.auth("alice")) as alice,
        httpx.AsyncClient(base_url=served.url, headers=served.auth("bob")) as bob,
    ):
        every = (await alice.get("/v1/sessions")).json()
        children = (await alice.get("/v1/sessions", params={"parent": "p1"})).json()
        none = (await alice.get("/v1/sessions", params={"parent": "unrelated"})).json()
        missing = await alice.get("/v1/sessions", params={"parent": "nope"})
        foreign = await bob.get("/v1/sessions", params={"parent": "p1"})
        docs = next(c for c in children if c["title"] == "docs")
        one = (await alice.get(f"/v1/sessions/{docs['id']}")).json()
        events = (await alice.get(f"/v1/sessions/{docs['id']}/events")).json()["events"]
        parent_events = (await alice.get("/v1/sessions/p1/events")).json()["events"]
    assert {s["id"] for s in every} == {"p1", "unrelated", *(c["id"] for c in children)}
    assert sorted(c["title"] for c in children) == ["docs", "task-2"]
    assert {c["parent_id"] for c in children} == {"p1"}
    assert [s["parent_id"] for s in every if s["id"] in ("p1", "unrelated")] == [None, None]
    assert none == [] and missing.status_code == 404 and foreign.status_code == 404
    assert one["parent_id"] == "p1" and one["metadata"]["task"] == "read the docs"
    assert docs["id"] == child.id  # the id `subagent/started` names is the one clients address
    assert events[0]["props"]["event"] == "stream_start" and len(events) >= 4
    assert {e["session_id"] for e in events} == {docs["id"]}
    assert parent_events == []
