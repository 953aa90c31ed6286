"""`OpenAIClient`: Chat Completions through the official `openai` SDK, streamed.

Works with OpenAI and the many OpenAI-compatible servers; `reasoning_content` (DeepSeek, vLLM,
...) becomes thinking. A connector `base_url` without a path gets `/v1` appended.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import openai

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


def wire_body(request: ModelRequest, model: str) -> dict[str, Any]:
    """The JSON body of the streamed Chat Completions request: `request_body`'s keyword arguments
    with `extra_body` merged in, as the SDK's `create` would send them."""
    body = request_body(request, model)
    body.update(body.pop("extra_body", None) or {})
    body["stream"] = True
    return body


def _usage(raw: Mapping[str, Any]) -> Usage:
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=raw.get("prompt_tokens") or 0,
        cached_input_tokens=prompt_details.get("cached_tokens") or 0,
        output_tokens=raw.get("completion_tokens") or 0,
        reasoning_tokens=completion_details.get("reasoning_tokens") or 0,
    )


def _pool() -> openai.DefaultAsyncHttpxClient:
    return openai.DefaultAsyncHttpxClient(verify=shared_tls())


class OpenAIClient:
    """`ModelClient` on OpenAI Chat Completions."""

    def __init__(self, settings: ClientSettings, connections: ModelConnections | None = None) -> None:
        """`connections`: the pool to share (left open by `aclose`); without one, a pool of its own."""
        self._settings = settings
        http, self._owns_pool = http_client(connections, "openai", _pool)
        self._sdk = openai.AsyncOpenAI(
            api_key=settings.secret_key() or "unset",
            base_url=api_root(settings.base_url),
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
        """The streamed answer. The request goes through the SDK (its retries, errors, headers),
        posted as the JSON it is, and each chunk comes back as its JSON: the SDK's typed `create`
        walked every message of the conversation to transform it and built a model per chunk,
        about two thirds of an LLM-mode turn's model call in CPU."""
        provider, timeout = "openai", self._settings.timeout
        with model_errors(provider, timeout):
            chunks = await self._sdk.post(
                "/chat/completions",
                body=wire_body(request, self.model),
                cast_to=object,
                stream=True,
                stream_cls=openai.AsyncStream[object],
            )
        try:
            open_calls: dict[int, int] = {}
            stopped = False
            async for chunk in guarded(chunks.__aiter__(), provider, timeout):
                if not isinstance(chunk, Mapping):
                    continue
                usage = chunk.get("usage")
                if isinstance(usage, Mapping):
                    yield UsageDelta(usage=_usage(usage))
                for choice in chunk.get("choices") or ():
                    delta = choice.get("delta") or {}
                    reasoning = delta.get("reasoning_content")
                    if isinstance(reasoning, str) and reasoning:
                        yield ThinkingDelta(text=reasoning)
                    content = delta.get("content")
                    if isinstance(content, str) and content:
                        yield TextDelta(text=content)
                    for call in delta.get("tool_calls") or ():
                        index = call.get("index", 0)
                        function = call.get("function") or {}
                        if index not in open_calls:
                            open_calls[index] = len(open_calls)
                            yield ToolCallStart(
                                index=open_calls[index],
                                id=call.get("id") or f"call_{index}",
                                name=function.get("name") or "",
                            )
                        arguments = function.get("arguments")
                        if arguments:
                            yield ToolCallArgs(index=open_calls[index], fragment=arguments)
                    if choice.get("finish_reason"):
                        for index in open_calls.values():
                            yield ToolCallEnd(index=index)
                        open_calls.clear()
                        stopped = True
                        raw = str(choice["finish_reason"])
                        yield StopDelta(reason=_STOP.get(raw, "other"), raw=raw)
            if not stopped:
                raise ModelError(provider, "the stream ended before the response finished", retryable=True)
        finally:
            await chunks.close()
