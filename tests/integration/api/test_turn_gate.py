"""A burst of websocket sessions on a real `cage serve` passes its door (`LoadGate`): the turns
beyond the floor wait there, all of them run, none is refused, and every session's events are
gap-free and equal its durable log; `/metrics` shows the door.

Real components: `cage serve` (uvicorn) as a subprocess on its own SQLite file, the fake model
server answering an LLM-mode assistant, websocket clients.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.fakes.assistants import write_assistant, write_connector
from tests.fakes.model_server import FakeModelServer
from tests.integration.api.test_crash_recovery import HEADERS, Serve

ASSISTANT = "tests.quick"
SESSIONS = 30
TURNS = 3


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    with FakeModelServer("text", host="127.0.0.1") as model:
        server = Serve(tmp_path)
        app = Path(server.env["CAGE_APP_DIR"])
        write_connector(
            app, "quick", kind="openai", model="fake-model@text", host=model.url + "/v1", key_env="K"
        )
        write_assistant(
            app,
            ASSISTANT,
            package={"name": "quick", "connector": "quick"},
            prompts="- role: system\n  content: Hi.\n",
        )
        server.env["K"] = "sk-fake-gate-key-0042"
        server.env["CAGE_MAX_TURNS_PER_OWNER"] = str(SESSIONS)
        server.env["CAGE_MAX_WEBSOCKETS_PER_OWNER"] = str(SESSIONS)
        server.env["CAGE_RATE_LIMIT_BURST"] = "1000"  # one key sends every message and read here
        try:
            server.start()
            yield server
        finally:
            server.stop()


async def _session(ws_url: str, session_id: str, together: asyncio.Barrier) -> tuple[list[int], list[str]]:
    """Run `TURNS` turns one after the other, the first once every session is connected; the seqs
    seen and any refusal or failed turn."""
    seqs: list[int] = []
    problems: list[str] = []
    url = f"{ws_url}/v1/sessions/{session_id}/ws?assistant_id={ASSISTANT}"
    async with connect(url, additional_headers=HEADERS) as ws:
        ready = json.loads(await ws.recv())
        assert ready["type"] == "session.ready", ready
        await together.wait()
        for n in range(TURNS):
            await ws.send(json.dumps({"type": "user_message", "text": f"turn {n}"}))
            while True:
                frame: dict[str, Any] = json.loads(await ws.recv())
                if frame["type"] == "session.error":
                    problems.append(frame["code"])
                    return seqs, problems
                if frame["type"].startswith("session."):
                    continue
                seqs.append(frame["seq"])
                props = frame.get("props", {})
                if (
                    frame["type"] == "event"
                    and props.get("event") == "stream_end"
                    and not frame.get("thread_id")
                ):
                    if props.get("status") != "completed":
                        problems.append(f"turn {props.get('status')}: {props.get('error')}")
                    break
    return seqs, problems


def _metric(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert found is not None, f"{name} not in /metrics"
    return float(found.group(1))


async def test_a_burst_of_sessions_waits_at_the_door_and_every_turn_runs_in_order(serve: Serve) -> None:
    ws_url = serve.url.replace("http://", "ws://")
    ids = [f"gate-{n}" for n in range(SESSIONS)]
    together = asyncio.Barrier(SESSIONS)
    sessions = asyncio.gather(*(_session(ws_url, i, together) for i in ids))
    results = await asyncio.wait_for(sessions, timeout=240)
    async with httpx.AsyncClient(base_url=serve.url, headers=HEADERS, timeout=30) as http:
        logged = [(await http.get(f"/v1/sessions/{i}/events", params={"limit": 10000})).json() for i in ids]
        metrics = (await http.get("/metrics")).text
    assert [problems for _, problems in results] == [[]] * SESSIONS
    for (seqs, _), log in zip(results, logged, strict=True):
        assert seqs == list(range(1, len(seqs) + 1))
        assert "events" in log, log
        assert seqs == [e["seq"] for e in log["events"]]
    assert _metric(metrics, "cage_turn_gate_waited_total") > 0  # thirty at once: past the floor of two
    assert _metric(metrics, "cage_turn_gate_refused_total") == 0
    assert _metric(metrics, "cage_turn_gate_running") == 0
    assert _metric(metrics, "cage_turn_gate_waiting") == 0
    assert _metric(metrics, "cage_turn_gate_limit") >= 2
