"""`cage schemas`: write or check the generated JSON Schemas in `schemas/`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer


def websocket_schema() -> dict[str, Any]:
    """The frames of `GET /v1/sessions/{session_id}/ws`: what a client sends, the `session.*` control
    frames the server sends, and (by reference to `stream-v1.json`) the protocol events."""
    from pydantic import TypeAdapter

    from orchestrator.api.frames import ClientFrame, ServerFrame

    keyed, defs = TypeAdapter.json_schemas(
        [
            ("client", "validation", TypeAdapter(ClientFrame)),
            ("server", "serialization", TypeAdapter(ServerFrame)),
        ],
        ref_template="#/$defs/{model}",
    )
    all_defs: dict[str, Any] = dict(defs.get("$defs", {}))
    all_defs["ClientFrame"] = {
        "description": "A frame the client sends (JSON text frame, closed union on `type`).",
        **keyed[("client", "validation")],
    }
    all_defs["ServerControlFrame"] = {
        "description": "A `session.*` control frame: never in the session's log, no `seq`.",
        **keyed[("server", "serialization")],
    }
    all_defs["ServerFrame"] = {
        "description": "What the server sends: a control frame, or a stream protocol event as logged.",
        "anyOf": [{"$ref": "#/$defs/ServerControlFrame"}, {"$ref": "stream-v1.json"}],
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Cage websocket frames (v1)",
        "description": (
            "GET /v1/sessions/{session_id}/ws: client frames and server frames (docs/protocol.md)."
        ),
        "anyOf": [{"$ref": "#/$defs/ClientFrame"}, {"$ref": "#/$defs/ServerFrame"}],
        "$defs": all_defs,
    }


def _generators() -> dict[str, Callable[[], dict[str, Any]]]:
    from orchestrator.dsl.schema import package_schema, sandbox_schema
    from orchestrator.stream.schema import protocol_schema

    return {
        "stream-v1.json": protocol_schema,
        "ws-v1.json": websocket_schema,
        "sandbox-v2.json": sandbox_schema,
        "package.json": package_schema,
    }


def render(schema: dict[str, Any]) -> str:
    """The checked-in form of a schema: sorted keys, two-space indent, trailing newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def schemas(
    out_dir: Annotated[Path, typer.Argument(help="Folder holding the schema files.")] = Path("schemas"),
    write: Annotated[bool, typer.Option("--write/--check", help="Write the files, or check them.")] = False,
) -> None:
    """Generate the protocol, sandbox.yao and package.yao JSON Schemas (or check they are current)."""
    stale: list[str] = []
    for name, make in _generators().items():
        path = out_dir / name
        text = render(make())
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if write:
            out_dir.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            typer.echo(f"wrote {path}")
        else:
            stale.append(str(path))
    if stale:
        typer.echo("stale schemas (run `make schemas`): " + ", ".join(stale), err=True)
        raise typer.Exit(1)
