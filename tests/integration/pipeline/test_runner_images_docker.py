"""An attached image reaches codex and opencode and goes on to the model: the real CLI in its
real image, the pipeline on the real Docker backend, the fake model server recording what each
CLI sends (codex: a Responses `input_image`; opencode: a Chat Completions `image_url`).

opencode runs both drives: `run --file` (oneshot) and the serve driver's file part (session)."""

from __future__ import annotations

import base64
import json
import uuid

import anyio
import pytest

from orchestrator.pipeline import Attachment
from tests.fakes.assistants import write_assistant
from tests.fakes.model_server import FakeModelServer
from tests.pipeline_rig import Rig

pytestmark = pytest.mark.slow
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
MODEL = {"codex": "gpt-5.5", "opencode": "fake-model"}


def vision_assistant(rig: Rig, server: FakeModelServer, runner: str, lifecycle: str) -> str:
    name = f"img-{runner}-{lifecycle}-{uuid.uuid4().hex[:6]}"
    (rig.root / "connectors").mkdir(parents=True, exist_ok=True)
    options = {
        "model": f"{MODEL[runner]}@hello",
        "key": "$ENV.FAKE_KEY",
        "host": server.url + "/v1",
        "max_retries": 1,
        "capabilities": {"vision": True},
    }
    (rig.root / "connectors" / f"{name}.conn.yao").write_text(
        json.dumps({"label": name, "type": "openai", "options": options})
    )
    assistant_id = f"img.{name.replace('-', '_')}"
    write_assistant(
        rig.root,
        assistant_id,
        package={"name": assistant_id, "connector": name},
        prompts="- role: system\n  content: You are a careful coding agent.\n",
        sandbox={
            "version": "2.0",
            "runner": {"name": runner},
            "lifecycle": lifecycle,
            "computer": {"memory": "1GB"},
        },
    )
    return assistant_id


@pytest.mark.parametrize(
    ("runner", "lifecycle"), [("codex", "session"), ("opencode", "oneshot"), ("opencode", "session")]
)
async def test_an_attached_image_reaches_the_cli_and_the_model(
    runner: str, lifecycle: str, e2e: Rig, model_server: FakeModelServer
) -> None:
    assistant_id = vision_assistant(e2e, model_server, runner, lifecycle)
    turn = e2e.turn(assistant_id, "what is in the picture?", chat_id=f"chat-{assistant_id}").model_copy(
        update={"attachments": (Attachment(name="shot.png", content=PNG, media_type="image/png"),)}
    )
    before = len(model_server.requests.all())
    with anyio.fail_after(300):
        handle = await e2e.service.start(turn)
        [e async for e in handle.events()]
        result = await handle.result()
    assert result.status == "completed", result.error
    sent = [json.dumps(r.body) for r in model_server.requests.all()[before:] if r.api != "count_tokens"]
    assert sent, "no model request"
    data = base64.b64encode(PNG).decode()
    assert any(f"data:image/png;base64,{data}" in body for body in sent), sent[-1][:3000]
    assert any("/workspace/attachments/shot.png" in body for body in sent)
