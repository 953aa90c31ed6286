"""`AnthropicClient`: the Messages API through the official `anthropic` SDK, streamed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic

from orchestrator.errors import ModelError
from orchestrator.llm.client import ClientSettings, guarded, model_errors, shared_tls
from orchestrator.llm.connections import ModelConnections, http_client
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
from orchestrator.llm.messages import (
    ChatMessage,
    ImageBlock,
    ModelRequest,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from orchestrator.stream import Usage

_STOP: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
}


def _content(message: ChatMessage) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            if block.text:
                out.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingBlock):
            if block.signature:  # unsigned thinking (from another provider) cannot be sent back
                out.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
        elif isinstance(block, ToolCallBlock):
            out.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments})
        elif isinstance(block, ImageBlock):
            source: dict[str, Any] = (
                {"type": "url", "url": block.url}
                if block.url
                else {"type": "base64", "media_type": block.media_type, "data": block.data}
            )
            out.append({"type": "image", "source": source})
        else:
            out.append(
                {
                    "type": "tool_result",
                    "tool_use_id": block.call_id,
                    "content": block.output or "(no output)",
                    "is_error": block.is_error,
                }
            )
    return out or [{"type": "text", "text": "(empty)"}]


def request_body(request: ModelRequest, model: str) -> dict[str, Any]:
    """The `messages.create` keyword arguments for a request (without `stream`)."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": [{"role": m.role, "content": _content(m)} for m in request.messages],
    }
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
    # This SDK's `messages.create` lacks some arguments (`temperature`, ...); the API takes the fields.
    extra: dict[str, Any] = {}
    sampling = request.sampling
    if request.thinking:
        budget = max(1024, min(request.thinking_budget, request.max_tokens - 1))
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    else:  # with extended thinking the API refuses temperature and top_p changes
        if request.temperature is not None:
            extra["temperature"] = request.temperature
        if sampling.top_p is not None:
            extra["top_p"] = sampling.top_p
    if sampling.stop:
        extra["stop_sequences"] = list(sampling.stop)
    # seed and the penalties have no Messages API field: the loader refuses them for this provider.
    extra.update(sampling.extra)
    if extra:
        body["extra_body"] = extra
    return body


def _usage(raw: Any, previous: Usage) -> Usage:
    def num(name: str, default: int) -> int:
        value = getattr(raw, name, None)
        return int(value) if isinstance(value, int) else default

    base_in = num("input_tokens", -1)
    read = num("cache_read_input_tokens", 0)
    created = num("cache_creation_input_tokens", 0)
    # Anthropic's `input_tokens` excludes the cached part; Cage's includes it.
    input_tokens = previous.input_tokens if base_in < 0 else base_in + read + created
    cached = previous.cached_input_tokens if base_in < 0 else read + created
    return Usage(
        input_tokens=input_tokens,
        cached_input_tokens=cached,
        output_tokens=num("output_tokens", previous.output_tokens),
    )


def _pool() -> anthropic.DefaultAsyncHttpxClient:
    return anthropic.DefaultAsyncHttpxClient(verify=shared_tls())


class AnthropicClient:
    """`ModelClient` on the Anthropic Messages API."""

    def __init__(self, settings: ClientSettings, connections: ModelConnections | None = None) -> None:
        """`connections`: the pool to share (left open by `aclose`); without one, a pool of its own."""
        self._settings = settings
        http, self._owns_pool = http_client(connections, "anthropic", _pool)
        self._sdk = anthropic.AsyncAnthropic(
            api_key=settings.secret_key() or "unset",
            base_url=settings.base_url,
            timeout=settings.timeout,
            max_retries=settings.max_retries,
            default_headers=settings.header_values() or None,
            http_client=http,
        )

    @property
    def model(self) -> str:
        return self._settings.model

    async def aclose(self) -> None:
        if self._owns_pool:
            await self._sdk.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta]:
        provider, timeout = "anthropic", self._settings.timeout
        with model_errors(provider, timeout):
            events = await self._sdk.messages.create(**request_body(request, self.model), stream=True)
        try:
            usage = Usage()
            calls: dict[int, int] = {}
            finished = False
            async for event in guarded(events.__aiter__(), provider, timeout):
                kind = event.type
                if kind == "message_start":
                    usage = _usage(event.message.usage, usage)
                    yield UsageDelta(usage=usage)
                elif kind == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        calls[event.index] = len(calls)
                        yield ToolCallStart(index=calls[event.index], id=block.id, name=block.name)
                elif kind == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        yield TextDelta(text=delta.text)
                    elif delta.type == "thinking_delta":
                        yield ThinkingDelta(text=delta.thinking)
                    elif delta.type == "signature_delta":
                        yield ThinkingDelta(signature=delta.signature)
                    elif delta.type == "input_json_delta" and event.index in calls:
                        yield ToolCallArgs(index=calls[event.index], fragment=delta.partial_json)
                elif kind == "content_block_stop":
                    if event.index in calls:
                        yield ToolCallEnd(index=calls[event.index])
                elif kind == "message_delta":
                    usage = _usage(event.usage, usage)
                    yield UsageDelta(usage=usage)
                    raw = event.delta.stop_reason or ""
                    yield StopDelta(reason=_STOP.get(raw, "other"), raw=raw)
                elif kind == "message_stop":
                    finished = True
            if not finished:
                raise ModelError(provider, "the stream ended before the message finished", retryable=True)
        finally:
            await events.close()
