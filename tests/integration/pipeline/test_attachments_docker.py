"""Attachments through the pipeline on the real Docker backend with the real Claude Code: the file
is in the box, the prompt names its path, and the image reaches the model as an image block (the
fake model server records the request Claude Code sends)."""

from __future__ import annotations

import base64
import json

import anyio
import docker
import pytest

from orchestrator.pipeline import Attachment
from tests.fakes.model_server import FakeModelServer
from tests.integration.pipeline.test_pipeline_docker import boxes, claude
from tests.pipeline_rig import Rig

pytestmark = pytest.mark.slow
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


async def test_an_attached_image_reaches_claude_code_and_the_model(
    e2e: Rig, model_server: FakeModelServer, docker_engine: docker.DockerClient
) -> None:
    assistant_id = claude(e2e.root, "e2e.attach", "fake-anthropic", "session")
    turn = e2e.turn(assistant_id, "what is in the picture?", session_id="chat-attach").model_copy(
        update={"attachments": (Attachment(name="shot.png", content=PNG, media_type="image/png"),)}
    )
    before = len(model_server.requests.all())
    with anyio.fail_after(240):
        handle = await e2e.service.start(turn)
        [e async for e in handle.events()]
        result = await handle.result()
    assert result.status == "completed", result.error
    [box] = boxes(docker_engine, e2e, assistant_id)
    code, out = box.exec_run(["cat", "attachments/shot.png"], workdir="/workspace")
    assert code == 0 and out == PNG
    requests = [r for r in model_server.requests.all()[before:] if r.api == "anthropic"]
    sent = json.dumps([r.body for r in requests])
    assert "/workspace/attachments/shot.png (image/png, 70 bytes)" in sent
    data = base64.b64encode(PNG).decode()
    assert any(
        part.get("type") == "image" and part.get("source", {}).get("data") == data
        for r in requests
        for m in r.body["messages"]
        if isinstance(m["content"], list)
        for part in m["content"]
    ), sent[:3000]
