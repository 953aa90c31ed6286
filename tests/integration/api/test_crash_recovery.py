"""M5 on a real `cage serve`: `kill -9` in the middle of a turn, start again, and the session's log
is closed (`orchestrator_restarted`), the user's message kept, and the next turn runs.

The server is a subprocess on loopback with its own SQLite file; its sandbox labels scope
reconcile to this test, so it never touches anyone else's containers.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.assistants import make_app, write_assistant
from tests.run_ids import process_run_id
from tests.serving import ServeProcess

KEY = "cage-bootstrap-crash-0123456789abcdef"
SLEEPER = """
from typing import Any

import anyio


async def create(ctx: Any, messages: list[dict[str, Any]], options: dict[str, Any]) -> None:
    users = [m["content"] for m in messages if m.get("role") == "user"]
    if users[-1] == "sleep":
        await ctx.send("sleeping")
        await anyio.sleep(600)
    await ctx.send(f"awake: {users[-1]} (user messages seen: {len(users)})")
"""


class Serve(ServeProcess):
    """`cage serve` as a subprocess, restartable on the same data directory and port."""

    def __init__(self, tmp_path: Path) -> None:
        app = make_app(tmp_path / "app")
        write_assistant(app, "tests.sleeper", hooks=SLEEPER)
        env = {
            **os.environ,
            "CAGE_APP_DIR": str(app),
            "CAGE_DATA_DIR": str(tmp_path / "data"),
            "CAGE_BOOTSTRAP_ADMIN_KEY": KEY,
            # a run id of this run: no worker's start-up sweep takes its boxes for a dead run's
            "CAGE_SANDBOX_LABELS": json.dumps({"cage.test-run": process_run_id()}),
            "CAGE_LOG_LEVEL": "INFO",
        }
        super().__init__("serve", env, tmp_path / "serve.log")


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    server = Serve(tmp_path)
    try:
        yield server
    finally:
        server.stop()


HEADERS = {"Authorization": f"Bearer {KEY}"}


def stream_turn(url: str, session_id: str, content: str, *, until: str | None = None) -> list[dict[str, Any]]:
    """POST a turn and read its SSE events (up to the first text containing `until`, if given)."""
    body = {"session_id": session_id, "messages": [{"role": "user", "content": content}]}
    events: list[dict[str, Any]] = []
    with httpx.stream(
        "POST", f"{url}/v1/assistants/tests.sleeper/stream", json=body, headers=HEADERS, timeout=30
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            events.append(event)
            if until is not None and until in json.dumps(event.get("props", {})):
                return events
    return events


@pytest.mark.docker
def test_kill_9_mid_turn_closes_the_log_and_the_session_goes_on(serve: Serve) -> None:
    serve.start()
    session = "crash-" + uuid.uuid4().hex[:8]
    seen = stream_turn(serve.url, session, "sleep", until="sleeping")
    assert seen[0]["props"]["event"] == "stream_start"
    serve.kill9()

    serve.start()
    page = httpx.get(f"{serve.url}/v1/sessions/{session}/events", headers=HEADERS, timeout=10).json()
    log = page["events"]
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    end = log[-1]
    assert end["props"]["event"] == "stream_end" and end["props"]["status"] == "error"
    assert "thread_id" not in end or end["thread_id"] is None
    errors = [e for e in log if e["type"] == "error"]
    assert [e["props"]["code"] for e in errors] == ["orchestrator_restarted"]
    assert "orchestrator_restarted" in serve.log.read_text()

    after = stream_turn(serve.url, session, "hello")
    texts = [e["props"]["content"] for e in after if e["props"].get("event") == "message_end"]
    assert after[-1]["props"]["event"] == "stream_end" and after[-1]["props"]["status"] == "completed"
    assert "awake: hello (user messages seen: 2)" in texts, texts  # the crashed turn's message was kept
    assert after[0]["seq"] == log[-1]["seq"] + 1


@pytest.mark.docker
async def test_sigterm_sends_the_cancelled_stream_end_before_the_socket_closes(serve: Serve) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    serve.start()
    ws_url = serve.url.replace("http://", "ws://")
    url = f"{ws_url}/v1/sessions/term-1/ws?assistant_id=tests.sleeper"
    frames: list[dict[str, Any]] = []
    async with connect(url, additional_headers=HEADERS) as conn:
        assert json.loads(await conn.recv())["type"] == "session.ready"
        await conn.send(json.dumps({"type": "user_message", "text": "sleep"}))
        while "sleeping" not in json.dumps(frames[-1:] or {}):
            frames.append(json.loads(await conn.recv()))
        assert serve.proc is not None
        serve.proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        with pytest.raises(ConnectionClosed):
            while True:
                frames.append(json.loads(await conn.recv()))
        took = time.monotonic() - started
    ends = [f for f in frames if f.get("props", {}).get("event") == "stream_end" and not f.get("thread_id")]
    assert [e["props"]["status"] for e in ends] == ["cancelled"], frames[-5:]
    assert took < 30  # inside compose's stop grace
    assert serve.proc.wait(30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it handled
