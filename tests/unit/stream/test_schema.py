"""The checked-in JSON Schema is current, the public API is curated, and the package stands alone."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import orchestrator.stream as stream
from orchestrator.stream import encoders as stream_encoders
from orchestrator.stream import protocol_schema, render_schema

SCHEMA = Path(__file__).resolve().parents[3] / "schemas" / "stream-v1.json"


def test_protocol_schema_is_current() -> None:
    assert SCHEMA.read_text(encoding="utf-8") == render_schema(protocol_schema()), "run `make schemas`"


def test_schema_covers_every_event_type_and_lifecycle_event() -> None:
    text = json.dumps(protocol_schema())
    for name in (
        "stream_start",
        "stream_end",
        "message_start",
        "message_end",
        "token/usage",
        "result/summary",
        "sandbox/status",
        "permission/request",
        "permission/resolved",
        "turn/stalled",
        "runner/raw",
    ):
        assert f'"{name}"' in text, name
    for kind in (
        "text",
        "thinking",
        "tool_call",
        "execute",
        "agent",
        "todo",
        "plan",
        "job",
        "question",
        "loading",
        "error",
    ):
        assert f'"{kind}"' in text, kind
    assert protocol_schema()["discriminator"]["propertyName"] == "type"


def _public(module: object) -> list[str]:
    return [n for n, v in vars(module).items() if not n.startswith("_") and not inspect.ismodule(v)]


def test_stream_exports_are_sorted_and_complete() -> None:
    assert stream.__all__ == sorted(_public(stream))
    assert stream_encoders.__all__ == sorted(_public(stream_encoders))


def test_stream_imports_no_engine_store_api_or_pipeline() -> None:
    code = (
        "import sys, orchestrator.stream\n"
        "bad = [m for m in sys.modules if m.split('.')[0] == 'docker' or m.startswith(("
        "'orchestrator.sandbox', 'orchestrator.api', 'orchestrator.pipeline', 'orchestrator.store'))]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
