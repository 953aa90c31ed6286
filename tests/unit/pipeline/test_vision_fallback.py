"""Yao's `uses.vision` fallback through the pipeline (LLM mode, the fake model server recording
each request): a model without vision gets the vision assistant's description of the image as
text; the vision assistant got the image itself."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from anyio.abc import TaskGroup

from orchestrator.store import Store
from tests.fakes.assistants import write_assistant
from tests.fakes.model_server import FakeModelServer
from tests.pipeline_rig import Rig
from tests.unit.pipeline.test_attachments import FILES, KEY, PNG, _connector, _run, server
from tests.unit.sandbox.fakes import FakeBackend

__all__ = ["server"]
DATA = base64.b64encode(PNG).decode()


def _apps(app_root: Path, host: str, *, describer: str) -> None:
    _connector(app_root, "blind", "openai", host, vision=False)
    _connector(app_root, "eyes", "openai", host, vision=True)
    write_assistant(
        app_root,
        "llm.blind",
        package={"name": "blind", "connector": "blind", "uses": {"vision": describer}},
        prompts="- role: system\n  content: Read.\n",
    )
    write_assistant(
        app_root,
        "llm.eyes",
        package={"name": "eyes", "connector": "eyes"},
        prompts="- role: system\n  content: Describe.\n",
    )


async def test_a_model_without_vision_gets_the_vision_assistants_description(
    app_root: Path,
    store: Store,
    server: FakeModelServer,
    tmp_path: Path,
    turn_tasks: TaskGroup,
) -> None:
    _apps(app_root, server.url + "/v1", describer="llm.eyes")
    rig = Rig.build(
        app_root, store, FakeBackend(), tasks=turn_tasks, data_dir=tmp_path / "d", environ={"K": KEY}
    )
    await _run(rig, "llm.blind", FILES)
    await rig.service.aclose()
    describe, answer = [r for r in server.requests.all() if r.api == "openai-chat"]
    assert f"data:image/png;base64,{DATA}" in json.dumps(describe.body)
    assert "Describe this image" in json.dumps(describe.body)
    body = json.dumps(answer.body)
    assert DATA not in body and "image_url" not in body
    assert "[image shot.png, described by llm.eyes: " in body
    assert "remember the milk" in body
    assert describe.peer == answer.peer, "the description did not go over the pipeline's model connection"


async def test_a_vision_assistant_without_vision_is_not_used(
    app_root: Path,
    store: Store,
    server: FakeModelServer,
    tmp_path: Path,
    turn_tasks: TaskGroup,
) -> None:
    _apps(app_root, server.url + "/v1", describer="llm.blind2")
    write_assistant(
        app_root,
        "llm.blind2",
        package={"name": "blind2", "connector": "blind"},
        prompts="- role: system\n  content: Describe.\n",
    )
    rig = Rig.build(
        app_root, store, FakeBackend(), tasks=turn_tasks, data_dir=tmp_path / "d", environ={"K": KEY}
    )
    await _run(rig, "llm.blind", FILES)
    await rig.service.aclose()
    [answer] = [r for r in server.requests.all() if r.api == "openai-chat"]
    body = json.dumps(answer.body)
    assert DATA not in body
    assert "[image shot.png (image/png, 70 bytes): not shown, this model has no image input]" in body
