"""`OpenAIClient`: Chat Completions through the official `openai` SDK, streamed.

Works with OpenAI and the many OpenAI-compatible servers; `reasoning_content` (DeepSeek, vLLM,
...) becomes thinking. A connector `base_url` without a path gets `/v1` appended.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import openai

from orchestrator.errors import ModelError
from orchestrator.llm.client import ClientSettings, guarded, model_errors, shared_tls
from orchestrator.llm.deltas import (
    ModelDelta,
    StopDelta,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    UsageDelta,
)
from orchestrator.llm.images import image_url
from orchestrator.llm.messages import (
    ChatMessage,
    ImageBlock,
    ModelRequest,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from orchestrator.stream import Usage

_STOP: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def api_root(base_url: str) -> str:
    """The SDK's `base_url`: a bare host gets `/v1`, a URL with a path is used as it is."""
    path = urlsplit(base_url).path
    return base_url if path not in ("", "/") else base_url.rstrip("/") + "/v1"


def _messages(system: str, messages: tuple[ChatMessage, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        if message.role == "user":
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    content = block.output or "(no output)"
                    out.append({"role": "tool", "tool_call_id": block.call_id, "content": content})
            text = "\n\n".join(b.text for b in message.content if isinstance(b, TextBlock) and b.text)
            images = [b for b in message.content if isinstance(b, ImageBlock)]
            if images:
                parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
                parts += [{"type": "image_url", "image_url": {"url": image_url(b)}} for b in images]
                out.append({"role": "user", "content": parts})
            elif text or not message.tool_results:
                out.append({"role": "user", "content": text})
            continue
        entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
        calls = [b for b in message.content if isinstance(b, ToolCallBlock)]
        if calls:
            entry["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in calls
            ]
        out.append(entry)
    return out


def request_body(request: ModelRequest, model: str) -> dict[str, Any]:
    """The `chat.completions.create` keyword arguments for a request (without `stream`)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": _messages(request.system, request.messages),
        "max_tokens": request.max_tokens,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in request.tools
        ]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    sampling = request.sampling
    typed: dict[str, Any] = {
        "top_p": sampling.top_p,
        "stop": list(sampling.stop) or None,
        "seed": sampling.seed,
        "presence_penalty": sampling.presence_penalty,
        "frequency_penalty": sampling.frequency_penalty,
        "reasoning_effort": sampling.reasoning_effort,
    }
    extra = {key: value for key, value in typed.items() if value is not None}
    extra.update(sampling.extra)
    if extra:  # `extra_body` reaches the JSON body whatever this SDK version types
        body["extra_body"] = extra
    return body


def _usage(raw: Any) -> Usage:
    prompt = getattr(raw, "prompt_tokens", 0) or 0
    completion = getattr(raw, "completion_tokens", 0) or 0
    prompt_details = getattr(raw, "prompt_tokens_details", None)
    completion_details = getattr(raw, "completion_tokens_details", None)
    return Usage(
        input_tokens=prompt,
        cached_input_tokens=getattr(prompt_details, "cached_tokens", 0) or 0,
        output_tokens=completion,
        reasoning_tokens=getattr(completion_details, "reasoning_tokens", 0) or 0,
    )


class OpenAIClient:
    """`ModelClient` on OpenAI Chat Completions."""

    def __init__(self, settings: ClientSettings) -> None:
        self._settings = settings
        self._sdk = openai.AsyncOpenAI(
            api_key=settings.secret_key() or "unset",
            base_url=api_root(settings.base_url),
            timeout=settings.timeout,
            max_retries=settings.max_retries,
            default_headers=settings.header_values() or None,
            http_client=openai.DefaultAsyncHttpxClient(verify=shared_tls()),
        )

    @property
    def model(self) -> str:
        return self._settings.model

    async def aclose(self) -> None:
        await self._sdk.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta]:
        provider, timeout = "openai", self._settings.timeout
        with model_errors(provider, timeout):
            chunks = await self._sdk.chat.completions.create(**request_body(request, self.model), stream=True)
        try:
            open_calls: dict[int, int] = {}
            stopped = False
            async for chunk in guarded(chunks.__aiter__(), provider, timeout):
                if chunk.usage is not None:
                    yield UsageDelta(usage=_usage(chunk.usage))
                for choice in chunk.choices:
                    delta = choice.delta
                    reasoning = (delta.model_extra or {}).get("reasoning_content")
                    if isinstance(reasoning, str) and reasoning:
                        yield ThinkingDelta(text=reasoning)
                    if delta.content:
                        yield TextDelta(text=delta.content)
                    for call in delta.tool_calls or []:
                        if call.index not in open_calls:
                            open_calls[call.index] = len(open_calls)
                            name = call.function.name if call.function and call.function.name else ""
                            yield ToolCallStart(
                                index=open_calls[call.index], id=call.id or f"call_{call.index}", name=name
                            )
                        if call.function and call.function.arguments:
                            yield ToolCallArgs(index=open_calls[call.index], fragment=call.function.arguments)
                    if choice.finish_reason:
                        for index in open_calls.values():
                            yield ToolCallEnd(index=index)
                        open_calls.clear()
                        stopped = True
                        raw = choice.finish_reason
                        yield StopDelta(reason=_STOP.get(raw, "other"), raw=raw)
            if not stopped:
                raise ModelError(provider, "the stream ended before the response finished", retryable=True)
        finally:
            await chunks.close()
