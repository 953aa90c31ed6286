"""`schemas/ws-v1.json`, the websocket frames, is current and describes what really travels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from orchestrator.cli.schemas import render, websocket_schema

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"
GOLDEN_WS = Path(__file__).resolve().parents[2] / "golden" / "stream" / "turn.ws"


def _validator(definition: str) -> jsonschema.Draft202012Validator:
    ws = json.loads((SCHEMAS / "ws-v1.json").read_text())
    stream = json.loads((SCHEMAS / "stream-v1.json").read_text())
    registry: Registry[Any] = Registry().with_resources(
        [("stream-v1.json", Resource.from_contents(stream)), ("ws-v1.json", Resource.from_contents(ws))]
    )
    return jsonschema.Draft202012Validator({"$ref": f"ws-v1.json#/$defs/{definition}"}, registry=registry)


def test_the_checked_in_schema_is_current() -> None:
    assert (SCHEMAS / "ws-v1.json").read_text() == render(websocket_schema()), "run `make schemas`"


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "user_message", "text": "hi", "client_id": "c1"},
        {"type": "interrupt"},
        {"type": "cancel"},
        {"type": "permission_response", "request_id": "r1", "decision": "allow"},
        {"type": "resume", "after_seq": 3},
        {"type": "ping"},
    ],
    ids=lambda f: f["type"],
)
def test_client_frames_validate(frame: dict[str, Any]) -> None:
    _validator("ClientFrame").validate(frame)


@pytest.mark.parametrize(
    "frame", [{"type": "user_message"}, {"type": "resume"}, {"type": "shout", "text": "x"}], ids=str
)
def test_bad_client_frames_do_not(frame: dict[str, Any]) -> None:
    assert not _validator("ClientFrame").is_valid(frame)


def test_every_server_frame_of_a_recorded_session_validates() -> None:
    validator = _validator("ServerFrame")
    frames = [json.loads(line) for line in GOLDEN_WS.read_text().splitlines() if line.strip()]
    frames += [
        {"type": "session.ready", "session_id": "c", "assistant_id": "a", "last_seq": 0, "after_seq": 0},
        {"type": "session.accepted", "turn_id": "t"},
        {"type": "session.error", "code": "turn_running", "message": "a turn is running"},
    ]
    for frame in frames:
        validator.validate(frame)
