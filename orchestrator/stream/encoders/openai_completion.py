"""A whole turn as one OpenAI `chat.completion` (the non-streaming answer).

Built by folding the chunks of `OpenAIChunkEncoder`, so streaming and non-streaming answers can
never disagree: the same content, reasoning, tool calls, results, finish reason and usage.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from orchestrator.stream.encoders.openai_chunks import OpenAIChunkEncoder
from orchestrator.stream.encoders.openai_wire import (
    CageToolResult,
    ChatCompletion,
    ChatCompletionChunk,
    CompletionChoice,
    CompletionMessage,
    CompletionUsage,
    ErrorChunk,
    ErrorObject,
    FunctionCall,
    ToolCall,
)
from orchestrator.stream.events import Event


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class CompletionWithError(ChatCompletion):
    """A `chat.completion` of a failed turn: `cage_error` holds the first error (extension)."""

    cage_error: ErrorObject | None = None


def aggregate_completion(
    events: Iterable[Event],
    *,
    model: str = "cage",
    completion_id: str | None = None,
    created: int | None = None,
) -> CompletionWithError:
    """One `chat.completion` for a turn's events (the turn should be complete)."""
    encoder = OpenAIChunkEncoder(
        model=model, completion_id=completion_id, created=created, include_usage=True
    )
    frames = [f for e in events for f in encoder.frames(e)] + encoder.close_frames()
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, _Call] = {}
    results: list[CageToolResult] = []
    error: ErrorObject | None = None
    last: ChatCompletionChunk | None = None
    usage: CompletionUsage | None = None
    for frame in frames:
        if isinstance(frame, ErrorChunk):
            error = error or frame.error
            continue
        if not isinstance(frame, ChatCompletionChunk):
            continue  # [DONE]
        last = frame
        usage = frame.usage or usage
        for choice in frame.choices:
            delta = choice.delta
            content.append(delta.content or "")
            reasoning.append(delta.reasoning_content or "")
            for tc in delta.tool_calls or ():
                call = calls.setdefault(tc.index, _Call())
                call.id = tc.id or call.id
                if tc.function is not None:
                    call.name = tc.function.name or call.name
                    call.arguments.append(tc.function.arguments or "")
            if delta.cage_tool_result is not None:
                results.append(delta.cage_tool_result)
    assert last is not None and usage is not None  # the encoder always finishes with both
    final = next(
        c for c in frames if isinstance(c, ChatCompletionChunk) and c.choices and c.choices[0].finish_reason
    )
    assert isinstance(final, ChatCompletionChunk)
    tool_calls = tuple(
        ToolCall(id=c.id, function=FunctionCall(name=c.name, arguments="".join(c.arguments)))
        for _, c in sorted(calls.items())
    )
    message = CompletionMessage(
        content="".join(content) or None,
        reasoning_content="".join(reasoning) or None,
        tool_calls=tool_calls or None,
        cage_tool_results=tuple(results) or None,
    )
    answer = CompletionChoice(
        message=message,
        finish_reason=final.choices[0].finish_reason or "stop",
        cage_status=final.choices[0].cage_status,
    )
    return CompletionWithError(
        id=last.id, created=last.created, model=last.model, choices=(answer,), usage=usage, cage_error=error
    )
