"""An LLM-mode turn killed (`kill -9`) after a tool round resumes from its checkpoint on a real
`cage serve`: the session's next message continues the conversation with round 1's tool result, and
round 1's tool is not run again.

Real components: `cage serve` (uvicorn) as a subprocess on its own SQLite file, the fake model
server, the `calc` MCP server over streamable HTTP (its `calls.log` counts the calls it saw).
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.assistants import write_assistant, write_connector
from tests.fakes.mcp_servers.http_server import HttpMcpServer
from tests.fakes.model_server import FakeModelServer
from tests.integration.api.test_crash_recovery import HEADERS, Serve

ASSISTANT = "tests.resumer"
KEY = "sk-fake-llm-resume-key-0077"


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer("text", host="127.0.0.1") as running:
        # round 1 adds, round 2 sleeps in its tool (the process is killed there)
        running.add_scenario(
            "crash",
            [
                {"tool": "calc__add", "args": {"a": 2, "b": 3}},
                {"tool": "calc__slow", "args": {"seconds": 600}},
            ],
        )
        running.add_scenario("after", [{"text": "resumed: the sum was 5."}])
        yield running


@pytest.fixture
def mcp_state(tmp_path: Path) -> Path:
    state = tmp_path / "mcp-state"
    state.mkdir()
    return state


@pytest.fixture
def serve(tmp_path: Path, model: FakeModelServer, mcp_state: Path) -> Iterator[Serve]:
    with HttpMcpServer(mcp_state) as mcp:
        server = Serve(tmp_path)
        app = Path(server.env["CAGE_APP_DIR"])
        for conn, scenario in (("crash", "crash"), ("after", "after")):
            write_connector(
                app, conn, kind="openai", model=f"fake-model@{scenario}", host=model.url + "/v1", key_env="K"
            )
        (app / "mcps").mkdir(exist_ok=True)
        (app / "mcps" / "calc.mcp.yao").write_text(json.dumps({"transport": "http", "url": mcp.url}))
        package = {
            "name": "resumer",
            "connector": "crash",
            "connector_options": {"connectors": ["crash", "after"]},
            "mcp": {"servers": ["calc"]},
        }
        write_assistant(app, ASSISTANT, package=package, prompts="- role: system\n  content: Be terse.\n")
        server.env["K"] = KEY
        try:
            yield server
        finally:
            server.stop()


def _checkpoint_rounds(db: Path) -> list[int]:
    """The rounds in the server's checkpoints table (this test's own database: one session)."""
    if not db.exists():
        return []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return sorted(int(row[0]) for row in conn.execute("SELECT round FROM checkpoints"))


def _calls(state: Path) -> list[str]:
    log = state / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def _post(url: str, session_id: str, content: str, **options: Any) -> httpx.Response:
    body = {"session_id": session_id, "messages": [{"role": "user", "content": content}], "options": options}
    return httpx.post(f"{url}/v1/assistants/{ASSISTANT}/stream", json=body, headers=HEADERS, timeout=120)


def _events(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


@pytest.mark.docker
def test_a_killed_llm_turn_resumes_from_its_checkpoint(
    serve: Serve, model: FakeModelServer, mcp_state: Path, tmp_path: Path
) -> None:
    serve.start()
    session = "resume-" + uuid.uuid4().hex[:8]
    db = tmp_path / "data" / "cage.db"
    body = {"session_id": session, "messages": [{"role": "user", "content": "add 2 and 3, then rest"}]}
    with httpx.stream(
        "POST", f"{serve.url}/v1/assistants/{ASSISTANT}/stream", json=body, headers=HEADERS, timeout=30
    ) as response:
        assert response.status_code == 200, response.read()
        deadline = time.monotonic() + 120
        # round 1's tools are done and checkpointed, round 2's tool is running
        while not (_checkpoint_rounds(db) == [1] and any(c.startswith("slow ") for c in _calls(mcp_state))):
            assert time.monotonic() < deadline, (_checkpoint_rounds(db), _calls(mcp_state))
            time.sleep(0.2)
        serve.kill9()
    assert [c.split()[0] for c in _calls(mcp_state)] == ["add", "slow"]

    serve.start()
    log = httpx.get(f"{serve.url}/v1/sessions/{session}/events", headers=HEADERS, timeout=10).json()["events"]
    [error] = [e for e in log if e["type"] == "error"]
    assert error["props"]["code"] == "orchestrator_restarted"
    assert error["props"]["details"] == {"resume_round": 1}

    before = len(model.requests.all())
    after = _post(serve.url, session, "go on", connector="after")
    assert after.status_code == 200, after.text
    events = _events(after)
    assert events[-1]["props"]["event"] == "stream_end" and events[-1]["props"]["status"] == "completed", (
        events
    )
    texts = [e["props"]["content"] for e in events if e["props"].get("event") == "message_end"]
    assert "resumed: the sum was 5." in texts, texts

    [request] = [r for r in model.requests.all()[before:] if r.scenario == "after"]
    messages = request.body["messages"]
    tool_results = [m for m in messages if m["role"] == "tool"]
    assert [m["content"] for m in tool_results] == ["5"], messages  # round 1's result, not round 2's
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users == ["add 2 and 3, then rest", "go on"], users  # the crashed prompt once, then the new one
    assert [c.split()[0] for c in _calls(mcp_state)] == ["add", "slow"]  # add was not run again
    assert _checkpoint_rounds(db) == []  # the finished turn dropped its own and the crashed one's
