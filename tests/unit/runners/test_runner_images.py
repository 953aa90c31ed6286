"""Attached images reach codex (`--image=<path>`) and opencode (`run --file <path>`, the serve
driver's file parts), by their path in the box; opencode's model entry declares image input only
for a connector with vision."""

from __future__ import annotations

import base64
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import SecretStr

from orchestrator.dsl import ConnectorSpec, ConnectorType
from orchestrator.dsl.connectors import Capabilities
from orchestrator.llm.messages import ImageBlock
from runners.base import ImagePart, RunnerExec, TurnRequest
from runners.codex import CodexAdapter
from runners.opencode import OpencodeAdapter
from runners.tai.adapter import TaiAdapter, tai_turn
from runners.tai.incontainer.cli import _messages as tai_messages
from runners.tai.turn import TaiImage

SHOT = ImagePart(name="shot.png", media_type="image/png", data="iVBO", path="/workspace/attachments/shot.png")


def connector(vision: bool) -> ConnectorSpec:
    return ConnectorSpec(
        id="fake",
        label="fake",
        type=ConnectorType.OPENAI,
        model="gpt-fake",
        base_url="http://model.internal:9000",
        key=SecretStr("sk-test-key-0123456789"),
        capabilities=Capabilities(vision=vision),
    )


def turn(vision: bool = True, **changes: Any) -> TurnRequest:
    values: dict[str, Any] = {
        "assistant_id": "demo.coder",
        "owner": "alice",
        "session_id": "chat-1",
        "turn_id": "turn-1",
        "prompt": "what is in the picture?",
        "images": (SHOT,),
        "connector": connector(vision),
    }
    return TurnRequest(**{**values, **changes})


def opencode_model(rexec: RunnerExec) -> dict[str, Any]:
    (text,) = [f.content for f in rexec.files if f.path.endswith("opencode/opencode.json")]
    data: dict[str, Any] = json.loads(text)
    (provider,) = data["provider"].values()
    (model,) = provider["models"].values()
    return dict(model)


def test_codex_gets_each_image_by_its_path_before_the_prompt() -> None:
    argv = CodexAdapter().build_exec(turn()).argv
    assert CodexAdapter.supports.images
    assert "--image=/workspace/attachments/shot.png" in argv
    assert argv.index("--image=/workspace/attachments/shot.png") < argv.index("--")


def test_codex_resumed_turn_still_gets_the_image() -> None:
    argv = CodexAdapter().build_exec(turn(resume={"thread_id": "th-1"})).argv
    assert argv.index("resume") < argv.index("--image=/workspace/attachments/shot.png") < argv.index("--")


def test_codex_without_images_has_no_image_flag() -> None:
    argv = CodexAdapter().build_exec(turn(images=())).argv
    assert not any(a.startswith("--image") for a in argv)


def test_opencode_run_attaches_the_file_and_the_model_takes_images() -> None:
    rexec = OpencodeAdapter().build_exec(turn(lifecycle="oneshot"))
    assert OpencodeAdapter.supports.images
    argv = rexec.argv
    assert argv[argv.index("--file") + 1] == "/workspace/attachments/shot.png"
    assert argv.index("--file") < argv.index("--")
    model = opencode_model(rexec)
    assert model["attachment"] is True
    assert model["modalities"] == {"input": ["text", "image"], "output": ["text"]}


def test_opencode_model_without_vision_declares_no_image_input() -> None:
    model = opencode_model(OpencodeAdapter().build_exec(turn(vision=False, lifecycle="oneshot")))
    assert "modalities" not in model and "attachment" not in model


def load_driver() -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "runners" / "opencode" / "incontainer" / "serve_driver.py"
    spec = importlib.util.spec_from_file_location("serve_driver_images", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_opencode_serve_driver_posts_the_image_as_a_file_part() -> None:
    argv = OpencodeAdapter().build_exec(turn(lifecycle="session")).argv
    at = argv.index("--file")
    assert argv[at + 1 : at + 3] == ("image/png", "/workspace/attachments/shot.png")
    driver = load_driver()
    args = driver.parse_args(list(argv[2:]))
    body = driver.prompt_body(args, "what is in the picture?")
    assert body["parts"] == [
        {"type": "text", "text": "what is in the picture?"},
        {
            "type": "file",
            "mime": "image/png",
            "url": "file:///workspace/attachments/shot.png",
            "filename": "shot.png",
        },
    ]


def test_tai_lists_the_images_for_a_vision_connector_only() -> None:
    assert TaiAdapter.supports.images
    [image] = tai_turn(turn()).images
    assert (image.path, image.media_type, image.name) == (
        "/workspace/attachments/shot.png",
        "image/png",
        "shot.png",
    )
    assert tai_turn(turn(vision=False)).images == ()


async def test_cage_tai_sends_the_boxed_file_as_an_image_part(tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    shot.write_bytes(b"\x89PNG-bytes")
    (tmp_path / "link.png").symlink_to(shot)
    doc = tai_turn(turn()).model_copy(
        update={
            "images": (
                TaiImage(path=str(shot), media_type="image/png", name="shot.png"),
                TaiImage(path=str(tmp_path / "link.png"), media_type="image/png", name="link.png"),
                TaiImage(path=str(tmp_path / "gone.png"), media_type="image/png", name="gone.png"),
            )
        }
    )
    [message] = await tai_messages(doc)
    images = [b for b in message.content if isinstance(b, ImageBlock)]
    assert [(b.name, base64.b64decode(b.data)) for b in images] == [("shot.png", b"\x89PNG-bytes")]
