"""A full coding session over the websocket against the real pipeline and a real Claude Code
container (fake model server): two turns, an interrupt in the middle of a third that keeps the
session, then a disconnect mid-turn and a reconnect with `after_seq` that gets exactly the
missed events."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from orchestrator.api import create_app
from orchestrator.settings import Settings
from tests.integration.runners.conftest import HOST_CA, App
from tests.integration.runners.conftest import app as app
from tests.integration.runners.conftest import model_server as model_server
from tests.unit.api.harness import BOOTSTRAP_KEY, ServerThread, create_keys
from tests.unit.api.wsclient import SessionClient, is_stream_end

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
SCENARIO = "ws-coding"
# Each turn runs one shell step, then answers. The step sleeps while `slow` exists in the
# workspace, so the third turn can be interrupted mid-tool.
STEPS = [
    {"shell": "while [ -f slow ]; do sleep 0.2; done; echo turn >> turns.txt"},
    {"text": "done"},
]


@pytest.fixture
def served(
    app: App,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[ServerThread, dict[str, str]]]:
    app.server.add_scenario(SCENARIO, STEPS)
    assistant = app.assistant("claude", scenario=SCENARIO, lifecycle="session")
    assert assistant == "e2e.claude"
    monkeypatch.setenv("FAKE_MODEL_KEY", "sk-fake-e2e-key-123456")
    settings = Settings(
        app_dir=app.root,
        data_dir=app.data_dir,
        sandbox_labels=app.labels,
        bootstrap_admin_key=BOOTSTRAP_KEY,
        extra_ca_certs=Path(HOST_CA) if Path(HOST_CA).is_file() else None,
        reaper_interval=3600.0,
    )
    keys = create_keys(settings, {"dev": ("user", "dev"), "ops": ("admin", "ops")})
    server = ServerThread(create_app(settings)).start(timeout=60)
    try:
        yield server, keys
    finally:
        server.stop(timeout=60)


def kinds(events: list[dict[str, object]]) -> set[str]:
    return {str(e["type"]) for e in events}


async def run_turn(ws: SessionClient, text: str) -> dict[str, object]:
    await ws.send(type="user_message", text=text)
    await ws.control("session.accepted")
    return await asyncio.wait_for(ws.until_stream_end(), 180)


async def test_a_coding_session_over_the_websocket(served: tuple[ServerThread, dict[str, str]]) -> None:
    server, keys = served
    user = {"Authorization": f"Bearer {keys['dev']}"}
    admin = {"Authorization": f"Bearer {keys['ops']}"}
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
        # Other tests of this session (the browser's) may keep boxes of the same owner alive.
        others = {b["name"] for b in (await http.get("/v1/sandboxes", headers=user)).json()}
    ws = await SessionClient.open(server.ws_url, "coding-1", keys["dev"], assistant_id="e2e.claude")
    await ws.control("session.ready")

    first = await run_turn(ws, "write the first line")
    second = await run_turn(ws, "write the second line")
    assert first["props"]["status"] == second["props"]["status"] == "completed"  # type: ignore[index]
    assert {"text", "execute"} <= kinds(ws.events)

    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
        (box,) = [
            b for b in (await http.get("/v1/sandboxes", headers=user)).json() if b["name"] not in others
        ]
        touched = await http.post(
            f"/v1/admin/sandboxes/{box['name']}/exec", headers=admin, json={"argv": ["touch", "slow"]}
        )
        assert touched.json()["exit_code"] == 0
        lines = await http.post(
            f"/v1/admin/sandboxes/{box['name']}/exec", headers=admin, json={"argv": ["cat", "turns.txt"]}
        )
        assert lines.json()["stdout"] == "turn\nturn"

        await ws.send(type="user_message", text="third, interrupted")
        third_turn = (await ws.control("session.accepted"))["turn_id"]
        while not any(
            e["type"] == "execute" and e["turn_id"] == third_turn and e["props"].get("status") == "running"
            for e in ws.events
        ):
            await asyncio.wait_for(ws.next(), 120)
        await ws.send(type="interrupt")
        await ws.control("session.interrupting")
        third = await asyncio.wait_for(ws.until_stream_end(), 60)
        assert third["turn_id"] == third_turn and third["props"]["status"] == "cancelled"  # type: ignore[index]

        await http.post(
            f"/v1/admin/sandboxes/{box['name']}/exec", headers=admin, json={"argv": ["rm", "slow"]}
        )
        still = (await http.get("/v1/sandboxes", headers=user)).json()
        assert [b["name"] for b in still if b["name"] not in others] == [box["name"]]  # kept its sandbox

        await ws.send(type="user_message", text="fourth, watched through a reconnect")
        await ws.control("session.accepted")
        await asyncio.wait_for(ws.until_seq(ws.events[-1]["seq"] + 2), 60)
        seen = ws.events[-1]["seq"]
        await ws.close()
        for _ in range(1500):  # the turn goes on without a client; wait for its end in the log
            logged = (
                await http.get("/v1/sessions/coding-1/events", headers=user, params={"after_seq": seen})
            ).json()
            if any(is_stream_end(e) for e in logged["events"]):
                break
            await asyncio.sleep(0.2)

    again = await SessionClient.open(server.ws_url, "coding-1", keys["dev"], after_seq=seen)
    await again.control("session.ready")
    fourth = await asyncio.wait_for(again.until_stream_end(), 60)
    await again.close()
    assert fourth["props"]["status"] == "completed"  # type: ignore[index]
    assert again.events == logged["events"]  # exactly the missed events, from the durable log
    everything = [e["seq"] for e in ws.events + again.events]
    assert everything == list(range(1, len(everything) + 1))  # no gap, no duplicate, across 4 turns


def test_the_official_openai_client_against_the_pipeline(
    served: tuple[ServerThread, dict[str, str]],
    app: App,
) -> None:
    """LLM mode (the native loop on the fake model server): streamed and non-streamed, with usage."""
    server, keys = served
    chat_dir = app.root / "assistants" / "e2e" / "chat"
    chat_dir.mkdir(parents=True)
    (chat_dir / "package.yao").write_text('{"name": "e2e chat", "connector": "fake-claude-ws-coding"}')
    (chat_dir / "prompts.yml").write_text("- role: system\n  content: Answer briefly.\n")
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key=keys["dev"], max_retries=0, timeout=120)
    answer = client.chat.completions.create(model="e2e.chat", messages=[{"role": "user", "content": "hi"}])
    chunks = list(
        client.chat.completions.create(
            model="e2e.chat",
            messages=[{"role": "user", "content": "hi again"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert answer.choices[0].message.content == "done"
    assert answer.usage is not None and answer.usage.prompt_tokens > 0 and answer.usage.completion_tokens > 0
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "done"
    usage = [c.usage for c in chunks if c.usage is not None]
    assert len(usage) == 1 and usage[0].total_tokens > 0
