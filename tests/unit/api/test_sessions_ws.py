"""The session websocket on a real server: turns, busy sessions, interrupts, reconnect with
`after_seq`, several watchers, keepalive frames, refusals."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from orchestrator.api import create_app
from tests.unit.api.conftest import Served, make_settings
from tests.unit.api.harness import ServerThread, create_keys, fake_services
from tests.unit.api.wsclient import SessionClient, is_stream_end
from tests.waiting import until


def texts(events: list[dict[str, object]]) -> str:
    return "".join(str(e["props"]["content"]) for e in events if e["type"] == "text")  # type: ignore[index]


async def test_a_session_is_created_on_first_use_and_runs_turns(served: Served) -> None:
    ws = await SessionClient.open(served.server.ws_url, "s1", served.keys["alice"], assistant_id="tests.echo")
    ready = await ws.control("session.ready")
    assert ready == {
        "type": "session.ready",
        "session_id": "s1",
        "assistant_id": "tests.echo",
        "last_seq": 0,
        "after_seq": 0,
    }
    await ws.send(type="user_message", text="hello", client_id="m1")
    accepted = await ws.control("session.accepted")
    end = await ws.until_stream_end()
    await ws.send(type="user_message", text="again")
    await ws.control("session.accepted")
    await ws.until_stream_end()
    await ws.close()
    assert accepted["client_id"] == "m1" and accepted["turn_id"].startswith("turn-")
    assert end["props"]["status"] == "completed" and end["turn_id"] == accepted["turn_id"]
    assert [e["seq"] for e in ws.events] == list(range(1, len(ws.events) + 1))
    assert texts(ws.events) == "echo: helloecho: again"
    async with httpx.AsyncClient(base_url=served.url, headers=served.auth("alice")) as client:
        session = (await client.get("/v1/sessions/s1")).json()
        logged = (await client.get("/v1/sessions/s1/events")).json()
    assert session["last_seq"] == len(ws.events) and session["running_turn_id"] is None
    assert logged["events"] == ws.events  # what the client saw is what the durable log holds


async def test_a_second_message_during_a_turn_is_rejected_and_interrupt_keeps_the_session(
    served: Served,
) -> None:
    ws = await SessionClient.open(served.server.ws_url, "s2", served.keys["alice"], assistant_id="tests.echo")
    await ws.control("session.ready")
    await ws.send(type="user_message", text="slow 200 0.05")
    turn = (await ws.control("session.accepted"))["turn_id"]
    await ws.send(type="user_message", text="too soon")
    busy = await ws.control("session.error")
    await ws.send(type="interrupt")
    interrupting = await ws.control("session.interrupting")
    end = await ws.until_stream_end()
    await ws.send(type="interrupt")
    idle = await ws.control("session.error")
    await ws.send(type="user_message", text="after")
    await ws.control("session.accepted")
    after = await ws.until_stream_end()
    await ws.close()
    assert busy["code"] == "turn_running" and "already running" in busy["message"]
    assert interrupting == {"type": "session.interrupting", "turn_id": turn, "force": False}
    assert end["props"]["status"] == "cancelled" and end["turn_id"] == turn
    assert idle["code"] == "no_turn"
    assert after["props"]["status"] == "completed"
    assert texts(ws.events).endswith("echo: after")


async def test_cancel_forces_the_turn_to_end(served: Served) -> None:
    ws = await SessionClient.open(served.server.ws_url, "s3", served.keys["alice"], assistant_id="tests.echo")
    await ws.control("session.ready")
    await ws.send(type="user_message", text="slow 100 5")  # would take minutes unless forced
    await ws.control("session.accepted")
    await ws.send(type="cancel")
    assert (await ws.control("session.interrupting"))["force"] is True
    end = await asyncio.wait_for(ws.until_stream_end(), 5)
    await ws.close()
    assert end["props"]["status"] == "cancelled"


async def test_reconnect_with_after_seq_gets_exactly_the_missed_events(served: Served) -> None:
    ws = await SessionClient.open(served.server.ws_url, "s4", served.keys["alice"], assistant_id="tests.echo")
    await ws.control("session.ready")
    await ws.send(type="user_message", text="slow 30 0.03")
    await ws.control("session.accepted")
    await ws.until_seq(5)
    seen = [e["seq"] for e in ws.events]
    await ws.close()  # the client goes away mid-turn; the turn goes on
    await asyncio.sleep(0.3)
    again = await SessionClient.open(served.server.ws_url, "s4", served.keys["alice"], after_seq=seen[-1])
    ready = await again.control("session.ready")
    await again.until_stream_end()
    await again.close()
    assert ready["after_seq"] == seen[-1] and ready["running_turn_id"] is not None
    resumed = [e["seq"] for e in again.events]
    assert resumed[0] == seen[-1] + 1
    assert seen + resumed == list(range(1, resumed[-1] + 1))  # no gap, no duplicate
    assert is_stream_end(again.events[-1]) and again.events[-1]["props"]["status"] == "completed"
    assert texts(ws.events + again.events).count("chunk") == 30


async def test_resume_frame_replays_from_the_log(served: Served) -> None:
    ws = await SessionClient.open(served.server.ws_url, "s5", served.keys["alice"], assistant_id="tests.echo")
    await ws.control("session.ready")
    await ws.send(type="user_message", text="one")
    await ws.until_stream_end()
    first = list(ws.events)
    await ws.send(type="resume", after_seq=2)
    await ws.control("session.ack")
    ws.events.clear()
    await ws.until_seq(first[-1]["seq"])
    await ws.close()
    assert ws.events == first[2:]


async def test_several_clients_watch_one_session(served: Served) -> None:
    a = await SessionClient.open(served.server.ws_url, "s6", served.keys["alice"], assistant_id="tests.echo")
    await a.control("session.ready")  # the session exists from here on
    b = await SessionClient.open(served.server.ws_url, "s6", served.keys["alice"])
    await b.control("session.ready")
    await a.send(type="user_message", text="shared")
    await a.until_stream_end()
    await b.until_stream_end()
    async with httpx.AsyncClient(base_url=served.url) as client:
        gauge = (await client.get("/metrics")).text
    await a.close()
    await b.close()
    assert a.events == b.events and texts(b.events) == "echo: shared"
    assert "cage_websocket_clients 2.0" in gauge


async def test_ping_bad_frames_and_attachments(served: Served) -> None:
    ws = await SessionClient.open(served.server.ws_url, "s7", served.keys["alice"], assistant_id="tests.echo")
    await ws.control("session.ready")
    await ws.send(type="ping")
    pong = await ws.control("session.pong")
    await ws.send(type="user_message")
    missing = await ws.control("session.error")
    await ws.send(type="dance")
    unknown = await ws.control("session.error")
    await ws.send(type="user_message", text="x", attachments=[{"name": "../etc", "content_base64": "aGk="}])
    traversal = await ws.control("session.error")
    await ws.send(type="permission_response", request_id="r1", decision="allow")
    unsupported = await ws.control("session.error")
    content = base64.b64encode(b"print('hi')\n").decode()
    await ws.send(
        type="user_message", text="with file", attachments=[{"name": "a.py", "content_base64": content}]
    )
    await ws.control("session.accepted")
    await ws.until_stream_end()
    await ws.close()
    assert pong == {"type": "session.pong"}
    assert missing["code"] == "bad_frame" and missing["fields"][0]["loc"] == "user_message.text"
    assert unknown["code"] == "bad_frame"
    assert traversal["code"] == "bad_frame" and "attachments.0.name" in traversal["fields"][0]["loc"]
    assert unsupported["code"] == "invalid"
    turns = served.server.app.state.api.services.turns
    assert turns.started[-1].attachments[0].content == b"print('hi')\n"


@pytest.mark.parametrize(
    ("who", "session", "assistant", "code", "close"),
    [
        ("bob", "owned-by-alice", None, "not_found", 4404),
        ("alice", "fresh", None, "not_found", 4404),
        ("alice", "fresh", "no.such.assistant", "not_found", 4404),
        ("nobody", "fresh", "tests.echo", "unauthorized", 4401),
    ],
)
async def test_refused_connections_say_why(
    served: Served, who: str, session: str, assistant: str | None, code: str, close: int
) -> None:
    owner = await SessionClient.open(
        served.server.ws_url, "owned-by-alice", served.keys["alice"], assistant_id="tests.echo"
    )
    await owner.control("session.ready")
    token = served.keys.get(who, "cage_000000000000_" + "x" * 43)
    ws = await SessionClient.open(served.server.ws_url, session, token, assistant_id=assistant)
    error = await ws.control("session.error")
    with pytest.raises(ConnectionClosed) as closed:
        await ws.next()
    await ws.close()
    await owner.close()
    assert error["code"] == code
    assert closed.value.rcvd is not None and closed.value.rcvd.code == close


async def test_a_silent_client_is_dropped_and_its_turn_goes_on(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    keys = create_keys(settings, {"alice": ("user", "alice")})
    server = ServerThread(create_app(settings, services=fake_services()), ws_ping_interval=0.3).start()
    try:
        ws = await SessionClient.open(server.ws_url, "quiet", keys["alice"], assistant_id="tests.echo")
        await ws.control("session.ready")
        await ws.send(type="user_message", text="slow 40 0.05")
        turn_id = (await ws.control("session.accepted"))["turn_id"]
        ws.conn.transport.pause_reading()  # no more reads: the server's pings go unanswered
        async with httpx.AsyncClient(
            base_url=server.base_url, headers={"Authorization": f"Bearer {keys['alice']}"}
        ) as http:
            dropped = await _eventually(http, "/metrics", lambda r: "cage_websocket_clients 0.0" in r.text)
            ended = await _eventually(
                http, "/v1/sessions/quiet", lambda r: r.json()["running_turn_id"] is None
            )
            events = (await http.get("/v1/sessions/quiet/events")).json()["events"]
            await _eventually(  # the metrics watcher counts the turn after its row closes
                http, "/metrics", lambda r: 'cage_turns_total{runner="llm",status="completed"} 1.0' in r.text
            )
            metrics = (await http.get("/metrics")).text
        ws.conn.transport.abort()
    finally:
        server.stop()
    assert dropped and ended
    assert events[-1]["turn_id"] == turn_id and events[-1]["props"]["status"] == "completed"
    assert sum(e["type"] == "text" for e in events) == 40  # the whole turn ran without its client
    assert 'cage_turns_total{runner="llm",status="completed"} 1.0' in metrics
    assert 'cage_turn_first_event_seconds_count{runner="llm"} 1.0' in metrics


async def _eventually(http: httpx.AsyncClient, path: str, check: Callable[[httpx.Response], bool]) -> bool:
    for _ in range(100):
        if check(await http.get(path)):
            return True
        await asyncio.sleep(0.1)
    return False


def _door(served: Served, closed: bool) -> None:
    """Close the fake pipeline's door (its `start` waits, as at a saturated server's `LoadGate`)
    or open it, on the server's own loop."""
    turns = served.server.app.state.api.services.turns

    async def move() -> None:
        if closed:
            turns.door = anyio.Event()
        else:
            turns.door.set()
            turns.door = None

    served.server.call(move())


async def test_a_message_waiting_for_its_turn_to_start_leaves_the_socket_answering(served: Served) -> None:
    turns = served.server.app.state.api.services.turns
    ws = await SessionClient.open(
        served.server.ws_url, "s-door", served.keys["alice"], assistant_id="tests.echo"
    )
    await ws.control("session.ready")
    _door(served, closed=True)
    await ws.send(type="user_message", text="hello", client_id="m1")
    await until(lambda: turns.waiting == 1, within=5, what="the start to wait at the door")
    await ws.send(type="ping")
    pong = await ws.control("session.pong")  # frames are read while the message waits
    await ws.send(type="user_message", text="again")
    busy = await ws.control("session.error")
    _door(served, closed=False)
    accepted = await ws.control("session.accepted")
    end = await ws.until_stream_end()
    await ws.close()
    assert pong == {"type": "session.pong"}
    assert busy["code"] == "turn_running" and "still waiting to start its turn" in busy["message"]
    assert accepted["client_id"] == "m1" and end["props"]["status"] == "completed"
    assert texts(ws.events) == "echo: hello"


async def test_an_interrupt_withdraws_a_message_still_waiting_for_its_turn(served: Served) -> None:
    turns = served.server.app.state.api.services.turns
    ws = await SessionClient.open(
        served.server.ws_url, "s-gone", served.keys["alice"], assistant_id="tests.echo"
    )
    await ws.control("session.ready")
    started = len(turns.started)
    _door(served, closed=True)
    await ws.send(type="user_message", text="never mind")
    await until(lambda: turns.waiting == 1, within=5, what="the start to wait at the door")
    await ws.send(type="interrupt")
    withdrawn = await ws.next()
    await until(lambda: turns.waiting == 0, within=5, what="the withdrawn start to leave the door")
    _door(served, closed=False)
    await ws.send(type="user_message", text="this one")
    await ws.control("session.accepted")
    await ws.until_stream_end()
    await ws.close()
    assert withdrawn["type"] == "session.error" and withdrawn["code"] == "no_turn"
    assert "withdrawn" in withdrawn["message"]
    assert [t.messages[0].content for t in turns.started[started:]] == ["this one"]
    assert texts(ws.events) == "echo: this one"
