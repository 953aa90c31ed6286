"""Attachments end to end through the pipeline: image parts for a model with vision (the fake
model server records the request), a text line for one without, text files inline, and a
runner's prompt that names the files it finds in the box."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup

from orchestrator.pipeline import Attachment
from orchestrator.store import Store
from tests.fakes.assistants import write_assistant
from tests.fakes.model_server import FakeModelServer
from tests.pipeline_rig import Rig
from tests.unit.pipeline.test_runner_mode import GOLDEN, RecordingBackend, claude_assistant
from tests.unit.sandbox.fakes import FakeBackend

KEY = "sk-fake-attachments-key-000123"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
FILES = (
    Attachment(name="shot.png", content=PNG, media_type="image/png"),
    Attachment(name="notes.txt", content=b"remember the milk", media_type="text/plain"),
)


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer("text", host="127.0.0.1") as running:
        yield running


def _connector(root: Path, conn_id: str, kind: str, host: str, *, vision: bool) -> None:
    options: dict[str, Any] = {"model": "fake-model@text", "key": "$ENV.K", "host": host, "max_retries": 1}
    if vision:
        options["capabilities"] = {"vision": True}
    (root / "connectors").mkdir(parents=True, exist_ok=True)
    (root / "connectors" / f"{conn_id}.conn.yao").write_text(
        json.dumps({"label": conn_id, "type": kind, "options": options})
    )


async def _run(rig: Rig, assistant_id: str, attachments: tuple[Attachment, ...]) -> None:
    turn = rig.turn(assistant_id, "what is in these?").model_copy(update={"attachments": attachments})
    with anyio.fail_after(60):
        handle = await rig.service.start(turn)
        [e async for e in handle.events()]
        result = await handle.result()
    assert result.status == "completed", result.error


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_images_reach_a_vision_model_as_image_parts_and_text_inline(
    kind: str,
    app_root: Path,
    store: Store,
    server: FakeModelServer,
    tmp_path: Path,
    turn_tasks: TaskGroup,
) -> None:
    host = server.url + "/v1" if kind == "openai" else server.url
    _connector(app_root, "eyes", kind, host, vision=True)
    write_assistant(
        app_root,
        "llm.eyes",
        package={"name": "eyes", "connector": "eyes"},
        prompts="- role: system\n  content: Look.\n",
    )
    rig = Rig.build(
        app_root, store, FakeBackend(), tasks=turn_tasks, data_dir=tmp_path / "d", environ={"K": KEY}
    )
    await _run(rig, "llm.eyes", FILES)
    await rig.service.aclose()
    [request] = [r for r in server.requests.all() if r.api in ("openai-chat", "anthropic")]
    last = request.body["messages"][-1]
    assert last["role"] == "user" and isinstance(last["content"], list)
    data = base64.b64encode(PNG).decode()
    if kind == "openai":
        images = [p for p in last["content"] if p["type"] == "image_url"]
        assert [p["image_url"]["url"] for p in images] == [f"data:image/png;base64,{data}"]
    else:
        images = [p for p in last["content"] if p["type"] == "image"]
        assert [p["source"] for p in images] == [{"type": "base64", "media_type": "image/png", "data": data}]
    text = json.dumps(last["content"])
    assert "what is in these?" in text and "remember the milk" in text and "notes.txt" in text


async def test_a_model_without_vision_gets_a_line_naming_the_image(
    app_root: Path,
    store: Store,
    server: FakeModelServer,
    tmp_path: Path,
    turn_tasks: TaskGroup,
) -> None:
    _connector(app_root, "blind", "openai", server.url + "/v1", vision=False)
    write_assistant(
        app_root,
        "llm.blind",
        package={"name": "blind", "connector": "blind"},
        prompts="- role: system\n  content: Read.\n",
    )
    rig = Rig.build(
        app_root, store, FakeBackend(), tasks=turn_tasks, data_dir=tmp_path / "d", environ={"K": KEY}
    )
    await _run(rig, "llm.blind", FILES)
    await rig.service.aclose()
    [request] = [r for r in server.requests.all() if r.api == "openai-chat"]
    body = json.dumps(request.body)
    assert "image_url" not in body and base64.b64encode(PNG).decode() not in body
    assert "[image shot.png (image/png, 70 bytes): not shown, this model has no image input]" in body
    assert "remember the milk" in body


async def test_a_runner_is_told_where_the_files_are_and_they_are_in_the_box(
    app_root: Path,
    store: Store,
    tmp_path: Path,
    turn_tasks: TaskGroup,
) -> None:
    backend = RecordingBackend(GOLDEN.read_bytes().splitlines())
    rig = Rig.build(
        app_root,
        store,
        backend,
        tasks=turn_tasks,
        data_dir=tmp_path / "d",
        environ={"K": "sk-ant-fake-key-0001"},
    )
    assistant_id = claude_assistant(app_root)
    await _run(rig, assistant_id, FILES)
    await rig.service.aclose()
    stdin = b"".join(backend.stdin).decode()
    assert "The user attached these files (in the workspace):" in stdin
    assert "/workspace/attachments/shot.png (image/png, 70 bytes)" in stdin
    assert "/workspace/attachments/notes.txt (text/plain, 17 bytes)" in stdin
    [line] = [json.loads(chunk) for chunk in stdin.splitlines() if '"type":"user"' in chunk]
    content = line["message"]["content"]
    assert content[0]["type"] == "text" and "shot.png" in content[0]["text"]
    assert content[1:] == [  # Claude Code gets the image itself too (stream-json image block)
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()},
        }
    ]
    [box] = list(backend.boxes.values())
    files = {**box.files, **{k: v for vol in backend.volumes.values() for k, v in vol.items()}}
    assert (
        files.get("attachments/shot.png") == PNG
        and files.get("attachments/notes.txt") == b"remember the milk"
    )
