"""Anthropic Messages API (`/v1/messages`): request reading and SSE / JSON rendering."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.model_server.reply import Conversation, Reply, call_arguments, chunks, is_injected, signature
from tests.fakes.model_server.scenario import TextPart, ThinkingPart
from tests.fakes.model_server.tools import OfferedTool, ToolCall
from tests.fakes.model_server.wire import SseEvent, text_of

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _tool_use_id(call: ToolCall) -> str:
    return "toolu_" + call.id.removeprefix("call_")


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "input_tokens": reply.usage.input_tokens,
        "output_tokens": reply.usage.output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": reply.usage.cached_input_tokens,
    }


def _block(part: TextPart | ThinkingPart | ToolCall) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ThinkingPart):
        return {"type": "thinking", "thinking": part.thinking, "signature": signature(part.thinking)}
    return {
        "type": "tool_use",
        "id": _tool_use_id(part),
        "name": part.name,
        "input": json.loads(call_arguments(part)),
    }


class AnthropicApi:
    """The Messages API as Claude Code and the `anthropic` SDK use it."""

    name = "anthropic"

    def read(self, body: dict[str, Any]) -> Conversation:
        tools = [
            OfferedTool(name=t["name"], call_name=t["name"], schema=t.get("input_schema") or {})
            for t in body.get("tools") or []
            if isinstance(t, dict) and isinstance(t.get("name"), str)
        ]
        results = 0
        for message in body.get("messages") or []:
            if not isinstance(message, dict) or message.get("role") != "user":
                continue  # assistant turns, and the `system` entries Claude Code puts in `messages`
            content = message.get("content")
            blocks = content if isinstance(content, list) else []
            answered = sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result")
            media = any(isinstance(b, dict) and b.get("type") in ("image", "document") for b in blocks)
            if answered:
                results += answered
            elif media or any(not is_injected(t) for t in text_of(content)):
                results = 0
        return Conversation(model=str(body.get("model", "")), tools=tools, tool_results=results)

    def events(self, reply: Reply, body: dict[str, Any]) -> list[SseEvent]:
        message: dict[str, Any] = {
            "id": f"msg_{reply.id}",
            "type": "message",
            "role": "assistant",
            "model": reply.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**_usage(reply), "output_tokens": 1},
        }
        out = [
            SseEvent.of("message_start", {"type": "message_start", "message": message}),
            SseEvent.of("ping", {"type": "ping"}),
        ]
        for index, part in enumerate(reply.parts):
            if isinstance(part, TextPart):
                start: dict[str, Any] = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": c} for c in chunks(part.text)]
            elif isinstance(part, ThinkingPart):
                start = {"type": "thinking", "thinking": "", "signature": ""}
                deltas = [{"type": "thinking_delta", "thinking": c} for c in chunks(part.thinking)]
                deltas.append({"type": "signature_delta", "signature": signature(part.thinking)})
            else:
                start = {"type": "tool_use", "id": _tool_use_id(part), "name": part.name, "input": {}}
                deltas = [
                    {"type": "input_json_delta", "partial_json": c} for c in chunks(call_arguments(part), 10)
                ]
            out.append(
                SseEvent.of(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                )
            )
            out.extend(
                SseEvent.of(
                    "content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}
                )
                for d in deltas
            )
            out.append(SseEvent.of("content_block_stop", {"type": "content_block_stop", "index": index}))
        stop = "tool_use" if reply.calls else "end_turn"
        out.append(
            SseEvent.of(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": _usage(reply),
                },
            )
        )
        out.append(SseEvent.of("message_stop", {"type": "message_stop"}))
        return out

    def response(self, reply: Reply) -> dict[str, Any]:
        return {
            "id": f"msg_{reply.id}",
            "type": "message",
            "role": "assistant",
            "model": reply.model,
            "content": [_block(p) for p in reply.parts],
            "stop_reason": "tool_use" if reply.calls else "end_turn",
            "stop_sequence": None,
            "usage": _usage(reply),
        }

    def error(self, status: int, message: str) -> dict[str, Any]:
        kind = _ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
