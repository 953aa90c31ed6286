"""OpenAI Responses API (`/v1/responses`): request reading and event / JSON rendering (what codex uses)."""

from __future__ import annotations

from typing import Any

from tests.fakes.model_server.reply import Conversation, Reply, chunks, is_injected
from tests.fakes.model_server.scenario import TextPart, ThinkingPart
from tests.fakes.model_server.tools import OfferedTool, ToolCall
from tests.fakes.model_server.wire import SseEvent, openai_error_type, text_of

CREATED = 1_700_000_000


def _tools(raw: list[Any], namespace: str | None = None) -> list[OfferedTool]:
    """Function and custom tools, with `namespace` tools flattened to `<ns>__<name>`."""
    found: list[OfferedTool] = []
    for t in raw:
        if not isinstance(t, dict):
            continue
        kind, name = t.get("type"), t.get("name")
        if kind == "namespace" and isinstance(name, str):
            found.extend(_tools(t.get("tools") or [], namespace=name))
        elif kind in ("function", "custom") and isinstance(name, str):
            found.append(
                OfferedTool(
                    name=f"{namespace}__{name}" if namespace else name,
                    call_name=name,
                    namespace=namespace,
                    schema=t.get("parameters") or {},
                    freeform=kind == "custom",
                )
            )
    return found


def _usage(reply: Reply) -> dict[str, Any]:
    u = reply.usage
    return {
        "input_tokens": u.input_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_input_tokens},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": u.input_tokens + u.output_tokens,
    }


def _item(reply: Reply, index: int, part: TextPart | ThinkingPart | ToolCall, done: bool) -> dict[str, Any]:
    """The output item for a part, empty (`done=False`, for `output_item.added`) or complete."""
    status = "completed" if done else "in_progress"
    if isinstance(part, ThinkingPart):
        summary = [{"type": "summary_text", "text": part.thinking}] if done else []
        return {"id": f"rs_{reply.id}_{index}", "type": "reasoning", "summary": summary}
    if isinstance(part, TextPart):
        content = [{"type": "output_text", "text": part.text, "annotations": []}] if done else []
        return {
            "id": f"msg_{reply.id}_{index}",
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": content,
        }
    item: dict[str, Any]
    if part.input is not None:
        item = {
            "id": f"ctc_{reply.id}_{index}",
            "type": "custom_tool_call",
            "status": status,
            "call_id": part.id,
            "name": part.name,
            "input": part.input if done else "",
        }
    else:
        item = {
            "id": f"fc_{reply.id}_{index}",
            "type": "function_call",
            "status": status,
            "call_id": part.id,
            "name": part.name,
            "arguments": part.arguments if done else "",
        }
    if part.namespace:
        item["namespace"] = part.namespace
    return item


class ResponsesApi:
    """The Responses API as codex and `client.responses.create` use it."""

    name = "openai-responses"

    def read(self, body: dict[str, Any]) -> Conversation:
        raw_input = body.get("input")
        items = raw_input if isinstance(raw_input, list) else []
        results = 0
        for item in items:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if isinstance(kind, str) and kind.endswith("_call_output"):
                results += 1
            elif (
                kind in (None, "message")
                and item.get("role") == "user"
                and any(not is_injected(t) for t in text_of(item.get("content")))
            ):
                results = 0
        return Conversation(
            model=str(body.get("model", "")), tools=_tools(body.get("tools") or []), tool_results=results
        )

    def _response(self, reply: Reply, status: str) -> dict[str, Any]:
        done = status == "completed"
        return {
            "id": f"resp_{reply.id}",
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "model": reply.model,
            "output": [_item(reply, i, p, True) for i, p in enumerate(reply.parts)] if done else [],
            "usage": _usage(reply) if done else None,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "parallel_tool_calls": True,
            "temperature": None,
            "tool_choice": "auto",
            "tools": [],
            "top_p": None,
        }

    def events(self, reply: Reply, body: dict[str, Any]) -> list[SseEvent]:
        payloads: list[dict[str, Any]] = [
            {"type": "response.created", "response": self._response(reply, "in_progress")},
            {"type": "response.in_progress", "response": self._response(reply, "in_progress")},
        ]
        for index, part in enumerate(reply.parts):
            item_id = _item(reply, index, part, False)["id"]
            at = {"item_id": item_id, "output_index": index}
            payloads.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": _item(reply, index, part, False),
                }
            )
            if isinstance(part, ThinkingPart):
                summary = {**at, "summary_index": 0}
                payloads.append(
                    {
                        "type": "response.reasoning_summary_part.added",
                        **summary,
                        "part": {"type": "summary_text", "text": ""},
                    }
                )
                payloads.extend(
                    {"type": "response.reasoning_summary_text.delta", **summary, "delta": c}
                    for c in chunks(part.thinking)
                )
                payloads.append(
                    {"type": "response.reasoning_summary_text.done", **summary, "text": part.thinking}
                )
                payloads.append(
                    {
                        "type": "response.reasoning_summary_part.done",
                        **summary,
                        "part": {"type": "summary_text", "text": part.thinking},
                    }
                )
            elif isinstance(part, TextPart):
                content = {**at, "content_index": 0}
                payloads.append(
                    {
                        "type": "response.content_part.added",
                        **content,
                        "part": {"type": "output_text", "text": "", "annotations": []},
                    }
                )
                payloads.extend(
                    {"type": "response.output_text.delta", **content, "delta": c, "logprobs": []}
                    for c in chunks(part.text)
                )
                payloads.append(
                    {"type": "response.output_text.done", **content, "text": part.text, "logprobs": []}
                )
                payloads.append(
                    {
                        "type": "response.content_part.done",
                        **content,
                        "part": {"type": "output_text", "text": part.text, "annotations": []},
                    }
                )
            elif part.input is not None:
                payloads.extend(
                    {"type": "response.custom_tool_call_input.delta", **at, "delta": c}
                    for c in chunks(part.input, 10)
                )
                payloads.append({"type": "response.custom_tool_call_input.done", **at, "input": part.input})
            else:
                payloads.extend(
                    {"type": "response.function_call_arguments.delta", **at, "delta": c}
                    for c in chunks(part.arguments, 10)
                )
                payloads.append(
                    {
                        "type": "response.function_call_arguments.done",
                        **at,
                        "name": part.name,
                        "arguments": part.arguments,
                    }
                )
            payloads.append(
                {
                    "type": "response.output_item.done",
                    "output_index": index,
                    "item": _item(reply, index, part, True),
                }
            )
        payloads.append({"type": "response.completed", "response": self._response(reply, "completed")})
        return [SseEvent.of(p["type"], {**p, "sequence_number": n}) for n, p in enumerate(payloads)]

    def response(self, reply: Reply) -> dict[str, Any]:
        return self._response(reply, "completed")

    def error(self, status: int, message: str) -> dict[str, Any]:
        return {
            "error": {
                "message": message,
                "type": openai_error_type(status),
                "param": None,
                "code": str(status),
            }
        }
