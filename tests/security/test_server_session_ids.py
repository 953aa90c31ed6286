"""Session (session) ids are per owner: another owner's id can be neither detected nor squatted.

A real server (uvicorn) running the real pipeline with the `hooks.memory` assistant, driven by real
websocket, SSE and HTTP clients. Alice and bob both use the session id `shared`: two independent
sessions, with their own logs, histories and session memory; what bob gets for an id alice uses is
what he gets for a free one (the lookup searches bob's sessions only, so it never even reads
alice's row); an admin sees both, each with its owner. The internal id (a digest of owner and
client id) never reaches a client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from orchestrator.api import create_app
from orchestrator.settings import Settings
from orchestrator.store.sessions import internal_session_id
from tests.fakes.assistants import make_app
from tests.unit.api.harness import BOOTSTRAP_KEY, ServerThread, create_keys, pipeline_services
from tests.unit.api.wsclient import SessionClient

ASSISTANT = "hooks.memory"
INTERNAL = {
    internal_session_id(owner, session) for owner in ("alice", "bob") for session in ("shared", "taken")
}


class Server:
    def __init__(self, thread: ServerThread, keys: dict[str, str]) -> None:
        self.thread = thread
        self.keys = keys
        self.url = thread.base_url

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[who]}"}

    def client(self, who: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers=self.auth(who), timeout=30)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    settings = Settings(
        app_dir=make_app(tmp_path / "app"), data_dir=tmp_path / "data", bootstrap_admin_key=BOOTSTRAP_KEY
    )
    keys = create_keys(
        settings, {"admin": ("admin", "ops"), "alice": ("user", "alice"), "bob": ("user", "bob")}
    )
    thread = ServerThread(create_app(settings, services=pipeline_services())).start()
    try:
        yield Server(thread, keys)
    finally:
        thread.stop()


def ops(*operations: dict[str, Any]) -> str:
    return json.dumps(list(operations))


def set_note(value: str) -> str:
    return ops({"op": "set", "space": "chat", "key": "note", "value": value})


GET_NOTE = ops({"op": "get", "space": "chat", "key": "note"})


async def completion(client: httpx.AsyncClient, session: str, content: str) -> httpx.Response:
    body = {"model": ASSISTANT, "messages": [{"role": "user", "content": content}]}
    return await client.post("/v1/chat/completions", json=body, headers={"X-Cage-Session-Id": session})


def answer(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return json.loads(response.json()["choices"][0]["message"]["content"])


async def sse_turn(client: httpx.AsyncClient, session: str, content: str) -> tuple[httpx.Response, list[Any]]:
    """One turn over `POST /v1/assistants/{id}/stream`; the response and its events."""
    body = {"messages": [{"content": content}], "session_id": session}
    async with client.stream("POST", f"/v1/assistants/{ASSISTANT}/stream", json=body) as response:
        lines = [line async for line in response.aiter_lines()]
    events = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    return response, events


def texts(events: list[dict[str, Any]]) -> str:
    return "".join(str(e["props"]["content"]) for e in events if e.get("type") == "text")


async def ws_turn(server: Server, who: str, session: str, content: str) -> tuple[dict[str, Any], list[Any]]:
    """One turn over the session websocket; the `session.ready` frame and the turn's events."""
    ws = await SessionClient.open(server.thread.ws_url, session, server.keys[who], assistant_id=ASSISTANT)
    try:
        ready = await ws.control("session.ready")
        await ws.send(type="user_message", text=content)
        await ws.control("session.accepted")
        await ws.until_stream_end()
        return ready, ws.events
    finally:
        await ws.close()


def no_internal_id(*texts: str) -> None:
    for text in texts:
        for internal in INTERNAL:
            assert internal not in text


async def test_the_same_id_under_two_owners_is_two_independent_sessions(server: Server) -> None:
    async with server.client("alice") as alice, server.client("bob") as bob, server.client("admin") as admin:
        # alice, over the OpenAI route, keeps a note in the session memory of her `shared`
        first = await completion(alice, "shared", set_note("alice's plan"))
        assert answer(first) == [True] and first.headers["x-cage-session-id"] == "shared"

        # bob opens his own `shared` over the websocket: a fresh session, not alice's log
        ready, ws_events = await ws_turn(server, "bob", "shared", GET_NOTE)
        assert ready["session_id"] == "shared" and ready["last_seq"] == 0
        assert texts(ws_events) == "[null]"  # alice's session memory is not his
        assert {e["session_id"] for e in ws_events} == {"shared"}

        # and writes his own note over SSE
        streamed, sse_events = await sse_turn(bob, "shared", set_note("bob's plan"))
        assert streamed.status_code == 200 and streamed.headers["x-cage-session-id"] == "shared"
        assert texts(sse_events) == "[true]" and {e["session_id"] for e in sse_events} == {"shared"}

        # neither affected the other
        assert answer(await completion(alice, "shared", GET_NOTE)) == ["alice's plan"]
        _, again = await sse_turn(bob, "shared", GET_NOTE)
        assert texts(again) == '["bob\'s plan"]'

        alice_log = (await alice.get("/v1/sessions/shared/events")).json()["events"]
        bob_log = (await bob.get("/v1/sessions/shared/events")).json()["events"]
        alice_view = (await alice.get("/v1/sessions/shared")).json()
        bob_view = (await bob.get("/v1/sessions/shared")).json()
        assert {e["session_id"] for e in alice_log + bob_log} == {"shared"}
        assert "alice's plan" in json.dumps(alice_log) and "bob's plan" not in json.dumps(alice_log)
        assert "bob's plan" in json.dumps(bob_log) and "alice's plan" not in json.dumps(bob_log)
        assert (alice_view["id"], alice_view["owner"], alice_view["last_seq"]) == (
            "shared",
            "alice",
            alice_log[-1]["seq"],
        )
        assert (bob_view["id"], bob_view["owner"], bob_view["last_seq"]) == (
            "shared",
            "bob",
            bob_log[-1]["seq"],
        )

        # an admin sees both, each with its owner, and reaches each by naming the owner
        listed = {
            owner: (await admin.get("/v1/admin/sessions", params={"owner": owner})).json()
            for owner in ("alice", "bob")
        }
        assert [(s["id"], s["owner"]) for s in listed["alice"]] == [("shared", "alice")]
        assert [(s["id"], s["owner"]) for s in listed["bob"]] == [("shared", "bob")]
        as_admin = await admin.get("/v1/admin/sessions/shared/events", params={"owner": "bob"})
        assert as_admin.json()["events"] == bob_log
        unnamed = await admin.get("/v1/admin/sessions/shared")
        assert unnamed.status_code == 422 and unnamed.json()["fields"][0]["loc"] == "query.owner"

        # bob deleting his `shared` leaves alice's alone
        assert (await bob.delete("/v1/sessions/shared")).status_code == 204
        assert (await bob.get("/v1/sessions/shared")).status_code == 404
        assert (await alice.get("/v1/sessions/shared")).json()["last_seq"] == alice_view["last_seq"]
        assert answer(await completion(alice, "shared", GET_NOTE)) == ["alice's plan"]

        no_internal_id(
            first.text,
            json.dumps(ready),
            json.dumps(ws_events),
            json.dumps(sse_events),
            json.dumps(alice_log),
            json.dumps(bob_log),
            json.dumps(listed),
            as_admin.text,
        )


async def _probe(server: Server, client: httpx.AsyncClient, session: str) -> list[Any]:
    """Everything bob can ask about `session` without creating it, with the id itself blanked out."""
    answers: list[Any] = []
    for method, path in (
        ("GET", f"/v1/sessions/{session}"),
        ("GET", f"/v1/sessions/{session}/events"),
        ("GET", f"/v1/sessions/{session}/stream"),
        ("GET", f"/v1/sessions/{session}/memory"),
        ("DELETE", f"/v1/sessions/{session}"),
    ):
        response = await client.request(method, path)
        answers.append(
            (method, path.replace(session, "ID"), response.status_code, response.text.replace(session, "ID"))
        )
    # the websocket without assistant_id: refused the same way
    url = f"{server.thread.ws_url}/v1/sessions/{session}/ws"
    async with connect(url, additional_headers=server.auth("bob")) as conn:
        frame = json.loads(await conn.recv())
        with pytest.raises(ConnectionClosed) as closed:
            await conn.recv()
    assert closed.value.rcvd is not None
    answers.append(("ws", json.dumps(frame).replace(session, "ID"), closed.value.rcvd.code))
    return answers


async def test_an_id_another_owner_uses_answers_like_a_free_one(server: Server) -> None:
    async with server.client("alice") as alice, server.client("bob") as bob:
        assert answer(await completion(alice, "taken", set_note("mine"))) == [True]

        taken = await _probe(server, bob, "taken")
        free = await _probe(server, bob, "free-1")
        assert taken == free
        assert taken[0][2] == 404 and taken[-1][2] == 4404

        # bob may use either id (nothing to squat): each becomes a new session of his own
        for session in ("taken", "free-1"):
            ready, events = await ws_turn(server, "bob", session, GET_NOTE)
            assert (ready["session_id"], ready["last_seq"]) == (session, 0) and texts(events) == "[null]"
        assert answer(await completion(alice, "taken", GET_NOTE)) == ["mine"]
        assert [s["id"] for s in (await alice.get("/v1/sessions")).json()] == ["taken"]
        assert sorted(s["id"] for s in (await bob.get("/v1/sessions")).json()) == ["free-1", "taken"]
        no_internal_id(json.dumps(taken), (await bob.get("/v1/sessions")).text)
