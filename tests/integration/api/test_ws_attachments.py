"""An image sent over the websocket reaches an LLM-mode assistant's vision connector as an image
part (real server, real pipeline, the fake model server records the request); a connector
without vision gets the line naming the image instead."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.api import create_app
from orchestrator.settings import Settings
from tests.fakes.model_server import FakeModelServer
from tests.unit.api.harness import BOOTSTRAP_KEY, ServerThread, create_keys
from tests.unit.api.wsclient import SessionClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
KEY = "sk-fake-ws-attach-key-000321"


@pytest.fixture
def served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, test_run_labels: dict[str, str]
) -> Iterator[tuple[ServerThread, str, FakeModelServer]]:
    root = tmp_path / "app"
    with FakeModelServer("text", host="127.0.0.1") as model:
        for conn_id, vision in (("eyes", True), ("blind", False)):
            options: dict[str, object] = {
                "model": "fake-model@text",
                "key": "$ENV.WS_KEY",
                "host": model.url + "/v1",
                "max_retries": 1,
            }
            if vision:
                options["capabilities"] = {"vision": True}
            (root / "connectors").mkdir(parents=True, exist_ok=True)
            (root / "connectors" / f"{conn_id}.conn.yao").write_text(
                json.dumps({"label": conn_id, "type": "openai", "options": options})
            )
            adir = root / "assistants" / "ws" / conn_id
            adir.mkdir(parents=True)
            (adir / "package.yao").write_text(json.dumps({"name": conn_id, "connector": conn_id}))
            (adir / "prompts.yml").write_text("- role: system\n  content: Describe.\n")
        monkeypatch.setenv("WS_KEY", KEY)
        settings = Settings(
            app_dir=root,
            data_dir=tmp_path / "data",
            bootstrap_admin_key=BOOTSTRAP_KEY,
            reaper_interval=3600.0,
            sandbox_labels=test_run_labels,  # else its start-up reconcile removes every oneshot box on the engine
        )
        keys = create_keys(settings, {"dev": ("user", "dev")})
        server = ServerThread(create_app(settings)).start(timeout=60)
        try:
            yield server, keys["dev"], model
        finally:
            server.stop(timeout=60)


async def _send_image(server: ServerThread, token: str, assistant_id: str, session_id: str) -> None:
    ws = await SessionClient.open(server.ws_url, session_id, token, assistant_id=assistant_id)
    await ws.control("session.ready")
    attachment = {
        "name": "shot.png",
        "content_base64": base64.b64encode(PNG).decode(),
        "media_type": "image/png",
    }
    await ws.send(type="user_message", text="what is this?", attachments=[attachment])
    await ws.control("session.accepted")
    end = await asyncio.wait_for(ws.until_stream_end(), 120)
    await ws.close()
    assert end["props"]["status"] == "completed", end  # type: ignore[index]


async def test_an_image_over_the_websocket_is_an_image_part_for_a_vision_model(
    served: tuple[ServerThread, str, FakeModelServer],
) -> None:
    server, token, model = served
    await _send_image(server, token, "ws.eyes", "ws-eyes")
    [request] = [r for r in model.requests.all() if r.api == "openai-chat"]
    content = request.body["messages"][-1]["content"]
    assert {"type": "text", "text": "what is this?"} in content
    assert {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
    } in content

    before = len(model.requests.all())
    await _send_image(server, token, "ws.blind", "ws-blind")
    [request] = [r for r in model.requests.all()[before:] if r.api == "openai-chat"]
    body = json.dumps(request.body)
    assert "image_url" not in body and "[image shot.png (image/png, 70 bytes): not shown" in body
