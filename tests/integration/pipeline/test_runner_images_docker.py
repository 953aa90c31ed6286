"""An attached image reaches codex, opencode, yaocode and tai and goes on to the model: the real
CLI in its real image (yaocode: the native loop on the host, tools in the box; tai: `cage-tai`
reads the file in the box), the pipeline on the real Docker backend, the fake model server
recording what each sends (codex: a Responses `input_image`; the others: a Chat Completions
`image_url`). opencode runs both drives: `run --file` (oneshot) and the serve driver's file part
(session).

A yaocode connector without vision gets a description instead: by its `runner.connectors.vision`
connector, else by the `uses.vision` assistant."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

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
MODEL = {"codex": "gpt-5.5", "opencode": "fake-model", "yaocode": "fake-model", "tai": "fake-model"}


def connector(rig: Rig, server: FakeModelServer, name: str, model: str, *, vision: bool) -> None:
    (rig.root / "connectors").mkdir(parents=True, exist_ok=True)
    options: dict[str, Any] = {
        "model": f"{model}@hello",
        "key": "$ENV.FAKE_KEY",
        "host": server.url + "/v1",
        "max_retries": 1,
    }
    if vision:
        options["capabilities"] = {"vision": True}
    (rig.root / "connectors" / f"{name}.conn.yao").write_text(
        json.dumps({"label": name, "type": "openai", "options": options})
    )


def vision_assistant(
    rig: Rig,
    server: FakeModelServer,
    runner: str,
    lifecycle: str,
    *,
    vision: bool = True,
    uses: str = "",
    roles: dict[str, str] | None = None,
) -> str:
    name = f"img-{runner}-{lifecycle}-{uuid.uuid4().hex[:6]}"
    connector(rig, server, name, MODEL[runner], vision=vision)
    assistant_id = f"img.{name.replace('-', '_')}"
    package: dict[str, Any] = {"name": assistant_id, "connector": name}
    if uses:
        package["uses"] = {"vision": uses}
    write_assistant(
        rig.root,
        assistant_id,
        package=package,
        prompts="- role: system\n  content: You are a careful coding agent.\n",
        sandbox={
            "version": "2.0",
            "runner": {"name": runner, "connectors": roles or {}},
            "lifecycle": lifecycle,
            "computer": {"memory": "1GB"},
        },
    )
    return assistant_id


async def attach_and_run(rig: Rig, assistant_id: str) -> None:
    turn = rig.turn(assistant_id, "what is in the picture?", session_id=f"chat-{assistant_id}").model_copy(
        update={"attachments": (Attachment(name="shot.png", content=PNG, media_type="image/png"),)}
    )
    with anyio.fail_after(300):
        handle = await rig.service.start(turn)
        [e async for e in handle.events()]
        result = await handle.result()
    assert result.status == "completed", result.error


@pytest.mark.parametrize(
    ("runner", "lifecycle"),
    [
        ("codex", "session"),
        ("opencode", "oneshot"),
        ("opencode", "session"),
        ("yaocode", "session"),
        ("tai", "session"),
    ],
)
async def test_an_attached_image_reaches_the_cli_and_the_model(
    runner: str, lifecycle: str, e2e: Rig, model_server: FakeModelServer
) -> None:
    assistant_id = vision_assistant(e2e, model_server, runner, lifecycle)
    before = len(model_server.requests.all())
    await attach_and_run(e2e, assistant_id)
    sent = [json.dumps(r.body) for r in model_server.requests.all()[before:] if r.api != "count_tokens"]
    assert sent, "no model request"
    data = base64.b64encode(PNG).decode()
    assert any(f"data:image/png;base64,{data}" in body for body in sent), sent[-1][:3000]
    assert any("/workspace/attachments/shot.png" in body for body in sent)


async def test_yaocode_without_vision_gets_the_uses_vision_assistants_description(
    e2e: Rig, model_server: FakeModelServer
) -> None:
    connector(e2e, model_server, "img-eyes", "fake-model", vision=True)
    write_assistant(
        e2e.root,
        "img.eyes",
        package={"name": "eyes", "connector": "img-eyes"},
        prompts="- role: system\n  content: Describe.\n",
    )
    assistant_id = vision_assistant(e2e, model_server, "yaocode", "session", vision=False, uses="img.eyes")
    before = len(model_server.requests.all())
    await attach_and_run(e2e, assistant_id)
    sent = [json.dumps(r.body) for r in model_server.requests.all()[before:] if r.api == "openai-chat"]
    data = base64.b64encode(PNG).decode()
    describe, *loop = sent
    assert f"data:image/png;base64,{data}" in describe and "Describe this image" in describe
    assert loop and all(data not in body for body in loop)
    assert "[image shot.png, described by img.eyes: " in loop[0]


async def test_yaocode_without_vision_gets_the_vision_roles_description(
    e2e: Rig, model_server: FakeModelServer
) -> None:
    connector(e2e, model_server, "img-role-eyes", "fake-eyes", vision=True)
    assistant_id = vision_assistant(
        e2e, model_server, "yaocode", "session", vision=False, roles={"vision": "img-role-eyes"}
    )
    before = len(model_server.requests.all())
    await attach_and_run(e2e, assistant_id)
    requests = [r for r in model_server.requests.all()[before:] if r.api == "openai-chat"]
    data = base64.b64encode(PNG).decode()
    describe, *loop = requests
    assert describe.body["model"] == "fake-eyes@hello"
    assert f"data:image/png;base64,{data}" in json.dumps(describe.body)
    assert loop and all(r.body["model"] == "fake-model@hello" for r in loop)
    assert all(data not in json.dumps(r.body) for r in loop)
    assert "[image shot.png, described by connector img-role-eyes: " in json.dumps(loop[0].body)
