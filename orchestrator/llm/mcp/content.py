"""MCP tool results as the text the model reads back.

Text blocks are joined; an embedded text resource contributes its text; images, audio, binary
resources and resource links become one-line placeholders (the model connectors carry text tool
results only); structured content is used when the server sent no text. The result is capped so
one chatty tool cannot fill the context window.
"""

from __future__ import annotations

import json

import mcp.types as mt

MAX_OUTPUT_CHARS = 100_000
"""Longest tool output handed to the model; the rest is cut with a note."""


def _block_text(block: mt.ContentBlock) -> str:
    if isinstance(block, mt.TextContent):
        return block.text
    if isinstance(block, mt.ImageContent):
        return f"[image: {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    if isinstance(block, mt.AudioContent):
        return f"[audio: {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    if isinstance(block, mt.ResourceLink):
        return f"[resource link: {block.uri}]"
    if isinstance(block, mt.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mt.TextResourceContents):
            return resource.text
        return f"[resource: {resource.uri}, {resource.mime_type or 'binary'}]"
    return f"[{getattr(block, 'type', 'unknown')} content]"


def result_text(result: mt.CallToolResult, *, limit: int = MAX_OUTPUT_CHARS) -> str:
    """The text of a tool result, at most `limit` characters (plus a note when cut)."""
    parts = [_block_text(block) for block in result.content]
    text = "\n".join(p for p in parts if p)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, sort_keys=True)
    if len(text) > limit:
        text = text[:limit] + f"\n[output cut: {len(text) - limit} more characters]"
    return text
