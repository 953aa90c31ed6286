"""The JSON Schema of the protocol, generated from the models and checked in as
`schemas/stream-v1.json` (`make schemas` rewrites it; a unit test fails when it is stale)."""

from __future__ import annotations

import json
from typing import Any

from orchestrator.stream.events import EventAdapter

SCHEMA_FILE = "stream-v1.json"


def protocol_schema() -> dict[str, Any]:
    """The JSON Schema of one protocol event (v1)."""
    schema = EventAdapter.json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "Cage stream protocol event (v1)"
    return schema


def render_schema(schema: dict[str, Any]) -> str:
    """The checked-in text of a schema: sorted keys, two-space indent, trailing newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
