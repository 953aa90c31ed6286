"""The OpenAI chat-completions shapes Cage writes (`chat.completion.chunk`, `chat.completion`).

Only the fields Cage fills are modelled. `cage_*` fields are Cage's extensions; OpenAI clients keep
unknown fields (the official Python client exposes them through `model_extra`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FunctionDelta(_Wire):
    name: str | None = None
    arguments: str | None = None


class ToolCallDelta(_Wire):
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: FunctionDelta | None = None


class CageToolResult(_Wire):
    """Cage extension: the result of a tool the agent ran itself (the client must not run it)."""

    tool_call_id: str
    name: str | None = None
    status: Literal["completed", "error"]
    output: str = ""
    is_error: bool = False
    exit_code: int | None = None


class ChunkDelta(_Wire):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: tuple[ToolCallDelta, ...] | None = None
    cage_tool_result: CageToolResult | None = None


class ChunkChoice(_Wire):
    index: int = 0
    delta: ChunkDelta
    finish_reason: FinishReason | None = None
    cage_status: Literal["completed", "error", "cancelled"] | None = None
    """Cage extension on the final chunk: how the turn really ended (OpenAI has no cancel reason)."""

    @model_serializer(mode="wrap")
    def _keep_finish_reason(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        data.setdefault("finish_reason", None)  # OpenAI sends an explicit null until the end
        return data


class PromptTokensDetails(_Wire):
    cached_tokens: int = 0


class CompletionTokensDetails(_Wire):
    reasoning_tokens: int = 0


class CompletionUsage(_Wire):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    completion_tokens_details: CompletionTokensDetails
    cage_cost_usd: float | None = None


class ChatCompletionChunk(_Wire):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: tuple[ChunkChoice, ...]
    usage: CompletionUsage | None = None


class ErrorObject(_Wire):
    message: str
    type: str
    code: str


class ErrorChunk(_Wire):
    """What OpenAI streams on a failure mid-stream; the official client raises `APIError` on it."""

    error: ErrorObject


class FunctionCall(_Wire):
    name: str
    arguments: str


class ToolCall(_Wire):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class CompletionMessage(_Wire):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: tuple[ToolCall, ...] | None = None
    cage_tool_results: tuple[CageToolResult, ...] | None = None


class CompletionChoice(_Wire):
    index: int = 0
    message: CompletionMessage
    finish_reason: FinishReason
    cage_status: Literal["completed", "error", "cancelled"] | None = None


class ChatCompletion(_Wire):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: tuple[CompletionChoice, ...]
    usage: CompletionUsage


def wire_json(model: BaseModel) -> dict[str, Any]:
    """JSON-ready data of a wire model, `None` fields left out (except `finish_reason` in chunks)."""
    data: dict[str, Any] = model.model_dump(mode="json", exclude_none=True)
    return data
