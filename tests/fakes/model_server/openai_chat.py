"""OpenAI Chat Completions (`/v1/chat/completions`): request reading and chunk / JSON rendering."""

from __future__ import annotations

from typing import Any

from tests.fakes.model_server.reply import Conversation, Reply, call_arguments, chunks, is_injected
from tests.fakes.model_server.scenario import TextPart, ThinkingPart
from tests.fakes.model_server.tools import OfferedTool
from tests.fakes.model_server.wire import SseEvent, openai_error_type, text_of

CREATED = 1_700_000_000
"""A fixed `created` timestamp keeps recorded transcripts stable."""


def _usage(reply: Reply) -> dict[str, Any]:
    u = reply.usage
    return {
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.input_tokens + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_input_tokens},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
    }


class ChatApi:
    """Chat Completions as opencode (`@ai-sdk/openai-compatible`) and the `openai` SDK use it."""

    name = "openai-chat"

    def read(self, body: dict[str, Any]) -> Conversation:
        tools = []
        for t in body.get("tools") or []:
            fn = t.get("function") if isinstance(t, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                tools.append(
                    OfferedTool(name=fn["name"], call_name=fn["name"], schema=fn.get("parameters") or {})
                )
        results = 0
        for message in body.get("messages") or []:
            role = message.get("role") if isinstance(message, dict) else None
            if role == "tool":
                results += 1
            elif role == "user":
                content = message.get("content")
                media = isinstance(content, list) and any(
                    isinstance(p, dict) and p.get("type") not in (None, "text") for p in content
                )
                if media or any(not is_injected(t) for t in text_of(content)):
                    results = 0
        return Conversation(model=str(body.get("model", "")), tools=tools, tool_results=results)

    def _chunk(self, reply: Reply, delta: dict[str, Any], finish: str | None = None) -> SseEvent:
        return SseEvent.of(
            None,
            {
                "id": f"chatcmpl-{reply.id}",
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": reply.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            },
        )

    def events(self, reply: Reply, body: dict[str, Any]) -> list[SseEvent]:
        out = [self._chunk(reply, {"role": "assistant", "content": ""})]
        call_index = 0
        for part in reply.parts:
            if isinstance(part, ThinkingPart):
                out.extend(self._chunk(reply, {"reasoning_content": c}) for c in chunks(part.thinking))
            elif isinstance(part, TextPart):
                out.extend(self._chunk(reply, {"content": c}) for c in chunks(part.text))
            else:
                head = {
                    "index": call_index,
                    "id": part.id,
                    "type": "function",
                    "function": {"name": part.name, "arguments": ""},
                }
                out.append(self._chunk(reply, {"tool_calls": [head]}))
                out.extend(
                    self._chunk(reply, {"tool_calls": [{"index": call_index, "function": {"arguments": c}}]})
                    for c in chunks(call_arguments(part), 10)
                )
                call_index += 1
        out.append(self._chunk(reply, {}, finish="tool_calls" if reply.calls else "stop"))
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            out.append(
                SseEvent.of(
                    None,
                    {
                        "id": f"chatcmpl-{reply.id}",
                        "object": "chat.completion.chunk",
                        "created": CREATED,
                        "model": reply.model,
                        "choices": [],
                        "usage": _usage(reply),
                    },
                )
            )
        out.append(SseEvent(data="[DONE]"))
        return out

    def response(self, reply: Reply) -> dict[str, Any]:
        thought = "".join(p.thinking for p in reply.parts if isinstance(p, ThinkingPart))
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if thought:
            message["reasoning_content"] = thought
        if reply.calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": call_arguments(c)}}
                for c in reply.calls
            ]
        return {
            "id": f"chatcmpl-{reply.id}",
            "object": "chat.completion",
            "created": CREATED,
            "model": reply.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.calls else "stop"}
            ],
            "usage": _usage(reply),
        }

    def error(self, status: int, message: str) -> dict[str, Any]:
        return {
            "error": {
                "message": message,
                "type": openai_error_type(status),
                "param": None,
                "code": str(status),
            }
        }
