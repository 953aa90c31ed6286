"""OpenAI `chat.completion.chunk` streaming, one encoder per turn.

Mapping (events not listed produce nothing: loading, sandbox status, permissions, raw...):

* `text` -> `delta.content`; `thinking` -> `delta.reasoning_content`;
* `tool_call` (LLM mode) -> `delta.tool_calls[{index, id, type, function{name, arguments}}]`,
  then argument fragments `delta.tool_calls[{index, function{arguments}}]`;
* `execute` (or an alias), first seen -> a `delta.tool_calls` entry announcing the run: `id` =
  tool_id, `name` = tool, `arguments` = the input JSON (or its first streamed fragment);
  later `input_delta`s -> argument fragments;
* `execute` completed/error -> `delta.cage_tool_result{tool_call_id, name, status, output,
  is_error, exit_code}` (extension);
* `error` -> `{"error": {message, type: code, code}}` (the official client raises `APIError`);
* root `stream_end` -> a final chunk `{delta: {}, finish_reason}`, then the usage chunk (when
  `include_usage`: `choices: []`, `usage{...}`), then `data: [DONE]`.

The first chunk carries `role: "assistant"`. Text (or thinking) of a new message after earlier
text is prefixed with a blank line, so separate messages do not run together in `content`. Tool
calls are numbered 0, 1, 2... in the order the runs appear, over the whole turn; the agent ran
them already, so the client must not run them.

`finish_reason`: `stop` for a completed turn, `length` when the runner's stop reason says the
model hit its token limit (`max_tokens`, `length`, `max_output_tokens`), `content_filter` for a
refusal. A failed or cancelled turn ends with `stop` too, as OpenAI has no better value, and the
final choice carries `cage_status: "error" | "cancelled"`; a failed turn whose failure had no
`error` event gets an error chunk from the `stream_end.error` first. `close()` before `stream_end`
(the producer vanished) ends the stream as cancelled. Nested calls (`thread_id`) stream their
content into the same completion; only the root `stream_end` finishes it.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel

from orchestrator.stream.content import (
    ErrorEvent,
    ExecuteEvent,
    ExecuteProps,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
)
from orchestrator.stream.encoders.openai_wire import (
    CageToolResult,
    ChatCompletionChunk,
    ChunkChoice,
    ChunkDelta,
    CompletionTokensDetails,
    CompletionUsage,
    ErrorChunk,
    ErrorObject,
    FinishReason,
    FunctionDelta,
    PromptTokensDetails,
    ToolCallDelta,
)
from orchestrator.stream.events import Event
from orchestrator.stream.lifecycle import LifecycleEvent, ResultSummary, StreamEnd, TokenUsage
from orchestrator.stream.usage import Usage

DONE: Literal["[DONE]"] = "[DONE]"
Frame = ChatCompletionChunk | ErrorChunk | Literal["[DONE]"]

_LENGTH_STOPS = frozenset({"max_tokens", "length", "max_output_tokens", "model_context_window_exceeded"})
_FILTER_STOPS = frozenset({"refusal", "content_filter"})


def usage_to_openai(usage: Usage | None, cost_usd: float | None = None) -> CompletionUsage:
    """OpenAI's usage block for a Cage `Usage` (zeros when unknown)."""
    u = usage or Usage()
    return CompletionUsage(
        prompt_tokens=u.input_tokens,
        completion_tokens=u.output_tokens,
        total_tokens=u.total_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=u.cached_input_tokens),
        completion_tokens_details=CompletionTokensDetails(reasoning_tokens=u.reasoning_tokens),
        cage_cost_usd=u.cost_usd if u.cost_usd is not None else cost_usd,
    )


class OpenAIChunkEncoder:
    """Stateful encoder for one turn. `frames()` gives models, `encode()` gives SSE text."""

    media_type = "text/event-stream"

    def __init__(
        self,
        *,
        model: str = "cage",
        completion_id: str | None = None,
        created: int | None = None,
        include_usage: bool = False,
    ) -> None:
        self._model = model
        self._id = completion_id
        self._created = created
        self._include_usage = include_usage
        self._role_sent = False
        self._done = False
        self._error_sent = False
        self._tool_index: dict[str, int] = {}
        self._args_sent: set[str] = set()
        self._llm_calls: dict[int, str] = {}
        self._step_usage: Usage | None = None
        self._turn_usage: Usage | None = None
        self._result: ResultSummary | None = None
        self._last_message: dict[str, str | None] = {}

    @property
    def done(self) -> bool:
        return self._done

    def encode(self, event: Event) -> str:
        return "".join(_sse(f) for f in self.frames(event))

    def close(self) -> str:
        return "".join(_sse(f) for f in self.close_frames())

    def close_frames(self) -> list[Frame]:
        if self._done:
            return []
        return self._finish("cancelled", None, None)

    def frames(self, event: Event) -> list[Frame]:
        """The OpenAI frames for one event (often none)."""
        if self._done:
            return []
        if self._id is None:
            self._id = f"chatcmpl-{event.turn_id or 'cage'}"
        if self._created is None:
            self._created = event.ts // 1000
        if isinstance(event, TextEvent):
            content = self._separated("content", event.message_id, event.props.content)
            return [self._chunk(ChunkDelta(content=content))] if content else []
        if isinstance(event, ThinkingEvent):
            content = self._separated("reasoning", event.message_id, event.props.content)
            return [self._chunk(ChunkDelta(reasoning_content=content))] if content else []
        if isinstance(event, ToolCallEvent):
            return self._tool_call(event)
        if isinstance(event, ExecuteEvent):
            return self._execute(event.props)
        if isinstance(event, ErrorEvent):
            self._error_sent = True
            body = ErrorObject(message=event.props.message, type=event.props.code, code=event.props.code)
            return [ErrorChunk(error=body)]
        if isinstance(event, LifecycleEvent):
            return self._lifecycle(event)
        return []

    def _separated(self, channel: str, message_id: str | None, content: str) -> str:
        """`content`, after a blank line when it starts a new message on a channel already used."""
        if not content:
            return ""
        previous = self._last_message.get(channel)
        self._last_message[channel] = message_id
        if previous is not None and previous != message_id:
            return "\n\n" + content
        return content

    def _lifecycle(self, event: LifecycleEvent) -> list[Frame]:
        props = event.props
        if isinstance(props, TokenUsage):
            if props.usage.scope == "step":
                self._step_usage = props.usage if self._step_usage is None else self._step_usage + props.usage
            elif props.usage.scope == "turn":
                self._turn_usage = props.usage
        elif isinstance(props, ResultSummary):
            self._result = props
            if props.usage is not None and props.usage.scope == "turn":
                self._turn_usage = props.usage
        elif isinstance(props, StreamEnd) and event.thread_id is None:
            return self._finish(props.status, props.error, props.usage)
        return []

    def _tool_call(self, event: ToolCallEvent) -> list[Frame]:
        props = event.props
        if props.id is not None:
            self._llm_calls[props.index] = props.id
            index = self._index(props.id)
            if props.arguments:
                self._args_sent.add(props.id)
            function = FunctionDelta(name=props.name or "", arguments=props.arguments)
            call = ToolCallDelta(index=index, id=props.id, type="function", function=function)
            return [self._chunk(ChunkDelta(tool_calls=(call,)))]
        key = self._llm_calls.get(props.index)
        if key is None or not props.arguments:
            return []
        self._args_sent.add(key)
        call = ToolCallDelta(index=self._tool_index[key], function=FunctionDelta(arguments=props.arguments))
        return [self._chunk(ChunkDelta(tool_calls=(call,)))]

    def _execute(self, props: ExecuteProps) -> list[Frame]:
        frames: list[Frame] = []
        key = props.tool_id
        if key not in self._tool_index:
            index = self._index(key)
            arguments = self._arguments(props)
            function = FunctionDelta(name=props.tool or "", arguments=arguments)
            call = ToolCallDelta(index=index, id=key, type="function", function=function)
            frames.append(self._chunk(ChunkDelta(tool_calls=(call,))))
        else:
            arguments = self._arguments(props)
            if arguments:
                call = ToolCallDelta(index=self._tool_index[key], function=FunctionDelta(arguments=arguments))
                frames.append(self._chunk(ChunkDelta(tool_calls=(call,))))
        if props.status in ("completed", "error"):
            result = CageToolResult(
                tool_call_id=key,
                name=props.tool,
                status=props.status,
                output=props.output or "",
                is_error=bool(props.is_error) or props.status == "error",
                exit_code=props.exit_code,
            )
            frames.append(self._chunk(ChunkDelta(cage_tool_result=result)))
        return frames

    def _arguments(self, props: ExecuteProps) -> str:
        """The next piece of the tool's arguments: a streamed fragment, or the whole input once."""
        if props.input_delta:
            self._args_sent.add(props.tool_id)
            return props.input_delta
        if props.input is not None and props.tool_id not in self._args_sent:
            self._args_sent.add(props.tool_id)
            return json.dumps(props.input, separators=(",", ":"), ensure_ascii=False)
        return ""

    def _index(self, key: str) -> int:
        if key not in self._tool_index:
            self._tool_index[key] = len(self._tool_index)
        return self._tool_index[key]

    def _finish(
        self, status: Literal["completed", "error", "cancelled"], error: str | None, usage: Usage | None
    ) -> list[Frame]:
        frames: list[Frame] = []
        if status == "error" and not self._error_sent:
            body = ErrorObject(message=error or "the turn failed", type="turn_failed", code="turn_failed")
            frames.append(ErrorChunk(error=body))
        choice = ChunkChoice(
            delta=self._delta_with_role(ChunkDelta()),
            finish_reason=self._finish_reason(status),
            cage_status=None if status == "completed" else status,
        )
        frames.append(self._chunk_of((choice,)))
        if self._include_usage:
            turn_usage = usage or self._turn_usage or (self._result.usage if self._result else None)
            if turn_usage is None and self._step_usage is not None:
                turn_usage = self._step_usage
            cost = self._result.cost_usd if self._result else None
            frames.append(self._chunk_of((), usage=usage_to_openai(turn_usage, cost)))
        frames.append(DONE)
        self._done = True
        return frames

    def _finish_reason(self, status: str) -> FinishReason:
        stop = self._result.stop_reason if self._result else None
        if status != "completed" or stop is None:
            return "stop"
        if stop in _LENGTH_STOPS:
            return "length"
        if stop in _FILTER_STOPS:
            return "content_filter"
        return "stop"

    def _delta_with_role(self, delta: ChunkDelta) -> ChunkDelta:
        if self._role_sent:
            return delta
        self._role_sent = True
        return delta.model_copy(update={"role": "assistant"})

    def _chunk(self, delta: ChunkDelta) -> ChatCompletionChunk:
        return self._chunk_of((ChunkChoice(delta=self._delta_with_role(delta)),))

    def _chunk_of(
        self, choices: tuple[ChunkChoice, ...], *, usage: CompletionUsage | None = None
    ) -> ChatCompletionChunk:
        return ChatCompletionChunk(
            id=self._id or "chatcmpl-cage",
            created=self._created or 0,
            model=self._model,
            choices=choices,
            usage=usage,
        )


def _sse(frame: Frame) -> str:
    if isinstance(frame, BaseModel):
        return f"data: {frame.model_dump_json(exclude_none=True)}\n\n"
    return f"data: {frame}\n\n"
