"""Bounded, redacted renderings of what Claude Code sends: tool output text and raw messages."""

from __future__ import annotations

import json
from typing import Any

from pydantic import JsonValue

from orchestrator.redaction import redact_value

OUTPUT_MAX = 256 * 1024
"""A tool's output in an event is cut to this many characters (a 50 MB `cat` stays in the CLI)."""
RAW_MAX = 64 * 1024
"""A forwarded unknown message larger than this (as JSON text) is replaced by its head."""


def tool_output(content: Any) -> str:
    """The text of a `tool_result`'s content: a string, or blocks (text kept, others named)."""
    if isinstance(content, str):
        return clip(content)
    if not isinstance(content, list):
        return "" if content is None else clip(json.dumps(content, ensure_ascii=False))
    parts: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block, dict) and isinstance(block.get("type"), str):
            parts.append(f"[{block['type']}]")
    return clip("\n".join(parts))


def clip(text: str, limit: int = OUTPUT_MAX) -> str:
    """`text` cut to `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… [{len(text) - limit} more characters not shown]"


def raw_payload(message: Any) -> JsonValue:
    """A message to forward as `runner/raw`: redacted, and only its head when it is large."""
    text = json.dumps(message, ensure_ascii=False, default=str)
    if len(text) > RAW_MAX:
        return {"truncated": True, "chars": len(text), "head": str(redact_value(text[:4096]))}
    value: JsonValue = redact_value(message)
    return value
