"""`TurnBuilder`: turns "the agent said / thought / ran this" into well-formed protocol events.

Pure bookkeeping, no I/O. Runner translators and the native loop call it so that none of them
repeats the rules of the protocol:

* a message window is opened (`message_start`) before its first delta and closed (`message_end`,
  carrying the full text or the merged tool props) before another content message starts;
* the running and the completed phase of one tool share one `message_id`, in two windows;
* a `loading` indicator is closed as soon as real content arrives;
* `stream_end` closes what is still open and fails tools that never finished.

Events come out unstamped (`seq` 0); the `SessionEmitter` stamps them. The builder makes several
events per line a CLI prints, from values it already knows to be valid, so it builds them with
constructors compiled once (`maker()`, as `trusted()` would build them) instead of validating
them again; what comes from a caller's data (tool inputs, raw messages, usage,
permission requests) is still validated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import JsonValue

from orchestrator.errors import ProtocolError
from orchestrator.redaction import redact
from orchestrator.stream.content import (
    ErrorEvent,
    ErrorProps,
    ExecuteEvent,
    ExecuteProps,
    ExecuteType,
    LoadingEvent,
    LoadingProps,
    TextEvent,
    TextProps,
    ThinkingEvent,
    ThinkingProps,
    ToolCallEvent,
    ToolCallProps,
)
from orchestrator.stream.events import Event
from orchestrator.stream.ids import IdSource
from orchestrator.stream.lifecycle import (
    EgressDenied,
    HookIgnored,
    HookNext,
    LifecycleEvent,
    LifecycleProps,
    MessageEnd,
    MessageStart,
    PermissionRequest,
    PermissionResolved,
    QuestionAnswered,
    QuestionAsked,
    ResultSummary,
    RunnerRaw,
    SandboxPhase,
    SandboxStatus,
    StreamEnd,
    StreamStart,
    StreamStatus,
    SubagentEnded,
    SubagentStarted,
    TokenUsage,
    TurnStalled,
)
from orchestrator.stream.trusted import checked_json, maker, trusted_copy
from orchestrator.stream.usage import Usage
from orchestrator.stream.window import Clock, Message, Window, monotonic_ms, settled

# The constructors of what the builder makes for every line, compiled once (`maker`): arguments
# in the order named.
_lifecycle = maker(LifecycleEvent, "thread_id", "props")
_message_start = maker(MessageStart, "message_id", "type")
_message_end = maker(MessageEnd, "message_id", "type", "status", "content", "duration_ms", "chunk_count")
_deltas: dict[type[Event], Callable[..., Event]] = {
    cls: maker(cls, "thread_id", "message_id", "chunk_id", "delta_action", "props", delta=True)
    for cls in (TextEvent, ThinkingEvent, ToolCallEvent, LoadingEvent)
}
_execute_delta = maker(
    ExecuteEvent, "type", "thread_id", "message_id", "chunk_id", "props", delta=True, delta_action="merge"
)
_text = maker(TextProps, "content")
_thinking = maker(ThinkingProps, "content")
_tool_running = maker(
    ExecuteProps, "tool_id", "tool", "input", "summary", "runner", "parent_tool_use_id", status="running"
)
_tool_input_delta = maker(ExecuteProps, "tool_id", "input_delta")
_tool_update = maker(ExecuteProps, "tool_id", "tool", "input", "summary")
_tool_unknown = maker(ExecuteProps, "tool_id", "runner")
_raw = maker(RunnerRaw, "runner", "raw_type", "raw")


class TurnBuilder:
    """Builds the events of one turn (or of one nested call, when `thread_id` is set).

    Every method returns the events to emit, in order. After `stream_end` every method raises
    `ProtocolError`.
    """

    def __init__(
        self,
        ids: IdSource,
        *,
        runner: str | None = None,
        thread_id: str | None = None,
        clock: Clock = monotonic_ms,
    ) -> None:
        self._ids = ids
        self._runner = runner
        self._thread_id = thread_id
        self._clock = clock
        self._started_ms = clock()
        self._started = False
        self._ended = False
        self._open: Window | None = None
        self._loading: Window | None = None
        self._tools: dict[str, Message] = {}
        self._calls: dict[int, Message] = {}
        self._step_usage: Usage | None = None
        self._turn_usage: Usage | None = None

    @property
    def thread_id(self) -> str | None:
        return self._thread_id

    @property
    def running_tools(self) -> tuple[str, ...]:
        """Ids of tools started and not finished yet."""
        return tuple(self._tools)

    def is_running(self, tool_id: str) -> bool:
        """Whether `tool_id` was started and not finished yet (`in running_tools`, without a copy)."""
        return tool_id in self._tools

    @property
    def turn_usage(self) -> Usage | None:
        """The turn's usage: the last `turn`-scope report, else the sum of `step` reports."""
        if self._turn_usage is not None:
            return self._turn_usage
        if self._step_usage is not None:
            return self._step_usage.model_copy(update={"scope": "turn"})
        return None

    def child(self, thread_id: str) -> TurnBuilder:
        """A builder for a nested call (delegation, agent-to-agent), sharing ids and clock."""
        return TurnBuilder(self._ids, runner=self._runner, thread_id=thread_id, clock=self._clock)

    # -- lifecycle ---------------------------------------------------------------------------

    def stream_start(
        self,
        assistant_id: str,
        *,
        assistant_name: str | None = None,
        session_id: str | None = None,
        metadata: dict[str, JsonValue] | None = None,
    ) -> list[Event]:
        self._live()
        if self._started:
            raise ProtocolError(["stream_start called twice"])
        self._started = True
        self._started_ms = self._clock()
        props = StreamStart(
            assistant_id=assistant_id,
            assistant_name=assistant_name,
            runner=self._runner,
            chat_id=session_id,
            metadata=metadata,
        )
        return [self._event(props)]

    def stream_end(
        self, status: StreamStatus = "completed", *, error: str | None = None, usage: Usage | None = None
    ) -> list[Event]:
        """Close every open message, fail unfinished tools, and end the turn."""
        self._live()
        events = self.close_open_messages(status)
        for tool_id in list(self._tools):
            events += self._finish_tool(tool_id, f"tool did not finish: turn {status}", True, None, status)
        props = StreamEnd(
            status=status,
            error=redact(error) if error is not None else None,
            duration_ms=max(0, self._clock() - self._started_ms),
            usage=usage if usage is not None else self.turn_usage,
        )
        events.append(self._event(props))
        self._ended = True
        return events

    def close_open_messages(self, status: StreamStatus = "completed") -> list[Event]:
        """Close the loading indicator and the open content window (a running tool keeps running)."""
        self._live()
        return [*self._loading_done(), *self._close(status)]

    # -- content -----------------------------------------------------------------------------

    def text(self, delta: str) -> list[Event]:
        return self._append("text", delta)

    def thinking(self, delta: str) -> list[Event]:
        return self._append("thinking", delta)

    def loading(self, message: str) -> list[Event]:
        """Show or update the loading indicator (its own window, replaced on each update)."""
        self._live()
        events: list[Event] = []
        if self._loading is None:
            message_obj = Message(self._ids.next_id("loading"), "loading")
            self._loading = Window(message_obj, self._clock())
            events.append(self._event(MessageStart(message_id=message_obj.message_id, type="loading")))
        self._loading.message.text[:] = [message]
        events.append(self._delta(self._loading, LoadingEvent, LoadingProps(message=message), "replace"))
        return events

    def loading_done(self) -> list[Event]:
        self._live()
        return self._loading_done()

    def _loading_done(self) -> list[Event]:
        """Close the loading indicator if it shows (every content method starts here)."""
        if self._loading is None:
            return []
        window, self._loading = self._loading, None
        window.message.text[:] = []
        events = [self._delta(window, LoadingEvent, LoadingProps(message="", done=True), "replace")]
        events.append(self._end(window, "completed"))
        return events

    def tool_call(
        self, index: int, arguments: str = "", *, id: str | None = None, name: str | None = None
    ) -> list[Event]:
        """LLM mode: a model's function call. A call with `id` starts a call at `index`; one without
        continues the call at `index` with the next fragment of its arguments."""
        self._live()
        events = self._loading_done()
        if id is not None:
            events += self._close("completed")
            props = ToolCallProps(index=index, id=id, name=name, arguments=arguments)
            message = Message(self._ids.next_id("tool_call"), "tool_call", props=props)
            self._calls[index] = message
            events += self._focus(message)
            assert self._open is not None
            events.append(self._delta(self._open, ToolCallEvent, props, "merge"))
            return events
        message_or_none = self._calls.get(index)
        if message_or_none is None:
            raise ProtocolError([f"tool_call fragment for index {index} before the call started"])
        message = message_or_none
        events += self._focus(message)
        assert isinstance(message.props, ToolCallProps) and self._open is not None
        message.props = message.props.model_copy(update={"arguments": message.props.arguments + arguments})
        events.append(
            self._delta(self._open, ToolCallEvent, ToolCallProps(index=index, arguments=arguments), "append")
        )
        return events

    def tool_started(
        self,
        tool_id: str,
        tool: str,
        input: JsonValue = None,
        *,
        runner: str | None = None,
        semantic_type: ExecuteType = "execute",
        summary: str | None = None,
        parent_tool_use_id: str | None = None,
    ) -> list[Event]:
        """An agent started a tool run: open its window with a `running` delta.

        A second start for the same `tool_id` (a CLI that streams the call and then repeats it
        whole) updates the run instead of opening another one.
        """
        self._live()
        if tool_id in self._tools:
            return self.tool_updated(tool_id, tool=tool, input=input, summary=summary)
        events = self._loading_done()
        if self._open is not None:
            events.append(self._end_open("completed"))
        props = _tool_running(
            tool_id, tool, checked_json(input), summary, runner or self._runner, parent_tool_use_id
        )
        message = Message(self._ids.next_id(semantic_type), semantic_type, props=props)
        self._tools[tool_id] = message
        events += self._focus(message)
        assert self._open is not None
        events.append(self._execute(self._open, props))
        return events

    def tool_input_delta(self, tool_id: str, fragment: str) -> list[Event]:
        """The next fragment of a running tool's input JSON (the most frequent delta of all: the
        fragment is appended to the message and folded into its props once, when they are read)."""
        self._live()
        message = self._tools.get(tool_id)
        if message is None:
            raise ProtocolError([f"tool {tool_id!r} is not running"])
        events = self._loading_done() if self._loading is not None else []
        window = self._open
        if window is None or window.message is not message:
            events += self._focus(message)
            window = self._open
            assert window is not None
        if fragment:
            message.input_parts.append(fragment)
        events.append(self._execute(window, _tool_input_delta(tool_id, fragment)))
        return events

    def tool_updated(
        self,
        tool_id: str,
        *,
        tool: str | None = None,
        input: JsonValue = None,
        summary: str | None = None,
    ) -> list[Event]:
        """New facts about a running tool: its whole input, a summary line."""
        return self._tool_delta(tool_id, _tool_update(tool_id, tool, checked_json(input), summary))

    def tool_finished(
        self,
        tool_id: str,
        output: str,
        *,
        is_error: bool = False,
        exit_code: int | None = None,
    ) -> list[Event]:
        """A tool run ended: its second window (same `message_id`) with the result, then closed.

        A result for a tool never started (a resumed CLI session) gets a window of its own.
        """
        self._live()
        return self._finish_tool(tool_id, output, is_error, exit_code, "completed")

    def _finish_tool(
        self, tool_id: str, output: str, is_error: bool, exit_code: int | None, window_status: StreamStatus
    ) -> list[Event]:
        events = self._loading_done()
        message = self._tools.pop(tool_id, None)
        if message is None:
            message = Message(
                self._ids.next_id("execute"),
                "execute",
                props=_tool_unknown(tool_id, self._runner),
            )
        if self._open is not None:
            events.append(self._end_open("completed"))
        message.props = settled(
            trusted_copy(
                message.tool_props(),
                output=redact(output),
                status="error" if is_error else "completed",
                is_error=is_error,
                exit_code=exit_code,
            )
        )
        events += self._focus(message)
        assert self._open is not None
        events.append(self._execute(self._open, message.props))
        events.append(self._end_open(window_status))
        return events

    # -- lifecycle events with no window -----------------------------------------------------

    def usage(self, usage: Usage) -> list[Event]:
        """Report usage; `step` reports add up to the turn's usage, a `turn` report sets it."""
        self._live()
        self._account(usage)
        return [self._event(TokenUsage(usage=usage))]

    def result(
        self,
        *,
        result: str | None = None,
        is_error: bool = False,
        num_turns: int | None = None,
        duration_ms: int | None = None,
        stop_reason: str | None = None,
        cost_usd: float | None = None,
        usage: Usage | None = None,
        runner_session_id: str | None = None,
    ) -> list[Event]:
        self._live()
        if usage is not None and usage.scope == "turn":
            self._turn_usage = usage
        props = ResultSummary(
            result=result,
            is_error=is_error,
            num_turns=num_turns,
            duration_ms=duration_ms,
            stop_reason=stop_reason,
            cost_usd=cost_usd,
            usage=usage,
            runner_session_id=runner_session_id,
        )
        return [self._event(props)]

    def error(self, message: str, code: str, details: dict[str, JsonValue] | None = None) -> list[Event]:
        """A standalone error event (no window); the message is redacted."""
        self._live()
        props = ErrorProps(message=redact(message), code=code, details=details)
        return [ErrorEvent(thread_id=self._thread_id, props=props)]

    def sandbox_status(
        self,
        phase: SandboxPhase,
        message: str = "",
        *,
        progress: float | None = None,
        sandbox_id: str | None = None,
    ) -> list[Event]:
        self._live()
        return [
            self._event(SandboxStatus(phase=phase, message=message, progress=progress, sandbox_id=sandbox_id))
        ]

    def egress_denied(self, host: str, port: int | None = None, method: str | None = None) -> list[Event]:
        self._live()
        return [self._event(EgressDenied(host=host, port=port, method=method))]

    def permission_request(
        self,
        request_id: str,
        tool: str,
        *,
        tool_id: str | None = None,
        input: JsonValue = None,
        reason: str | None = None,
        rule: str | None = None,
        deadline: str | None = None,
    ) -> list[Event]:
        self._live()
        props = PermissionRequest(
            request_id=request_id,
            tool=tool,
            tool_id=tool_id,
            input=input,
            reason=reason,
            rule=rule,
            deadline=deadline,
        )
        return [self._event(props)]

    def permission_resolved(
        self,
        request_id: str,
        decision: Literal["allow", "deny"],
        *,
        by: Literal["user", "policy", "timeout"] = "user",
        message: str | None = None,
        tool: str | None = None,
        tool_id: str | None = None,
        rule: str | None = None,
        always: bool = False,
    ) -> list[Event]:
        self._live()
        props = PermissionResolved(
            request_id=request_id,
            decision=decision,
            by=by,
            message=message,
            tool=tool,
            tool_id=tool_id,
            rule=rule,
            always=always,
        )
        return [self._event(props)]

    def question(
        self,
        request_id: str,
        text: str,
        *,
        options: Sequence[str] = (),
        tool_id: str | None = None,
        deadline: str | None = None,
    ) -> list[Event]:
        """A question of the agent to its user (`question`)."""
        self._live()
        props = QuestionAsked(
            request_id=request_id, text=text, options=tuple(options), tool_id=tool_id, deadline=deadline
        )
        return [self._event(props)]

    def question_answered(
        self, request_id: str, answer: str, *, by: Literal["user", "timeout", "policy"] = "user"
    ) -> list[Event]:
        self._live()
        return [self._event(QuestionAnswered(request_id=request_id, answer=answer, by=by))]

    def stalled(self, idle_ms: int, message: str = "") -> list[Event]:
        self._live()
        return [self._event(TurnStalled(idle_ms=idle_ms, message=message))]

    def hook_next(
        self, assistant_id: str, *, data: JsonValue = None, metadata: dict[str, JsonValue] | None = None
    ) -> list[Event]:
        """What a Next hook returned for the client (`data`, `metadata`)."""
        self._live()
        return [self._event(HookNext(assistant_id=assistant_id, data=data, metadata=metadata))]

    def hook_ignored(self, assistant_id: str, hook: str, keys: Sequence[str], reason: str) -> list[Event]:
        """A hook's keys Cage does not act on (a warning; the turn goes on)."""
        self._live()
        props = HookIgnored(assistant_id=assistant_id, hook=hook, keys=tuple(keys), reason=reason)
        return [self._event(props)]

    def subagent_started(self, session_id: str, name: str, *, tool_id: str | None = None) -> list[Event]:
        """A sub-agent began in its child session `session_id`."""
        self._live()
        return [self._event(SubagentStarted(session_id=session_id, name=name, tool_id=tool_id))]

    def subagent_ended(
        self, session_id: str, name: str, status: StreamStatus, *, error: str | None = None
    ) -> list[Event]:
        self._live()
        props = SubagentEnded(
            session_id=session_id, name=name, status=status, error=redact(error) if error else None
        )
        return [self._event(props)]

    def raw(self, raw_type: str, raw: JsonValue, *, runner: str | None = None) -> list[Event]:
        """Forward a CLI message the translator does not understand."""
        self._live()
        props = _raw(runner or self._runner or "unknown", raw_type, checked_json(raw))
        return [self._event(props)]

    # -- internals ---------------------------------------------------------------------------

    def _live(self) -> None:
        if self._ended:
            raise ProtocolError(["event built after stream_end"])

    def _account(self, usage: Usage) -> None:
        if usage.scope == "step":
            self._step_usage = usage if self._step_usage is None else self._step_usage + usage
        elif usage.scope == "turn":
            self._turn_usage = usage

    def _event(self, props: LifecycleProps) -> LifecycleEvent:
        return _lifecycle(self._thread_id, props)

    def _append(self, kind: Literal["text", "thinking"], delta: str) -> list[Event]:
        self._live()
        if not delta:
            return []
        events = self._loading_done() if self._loading is not None else []
        window = self._open
        if window is None or window.message.type != kind:
            events += self._focus(Message(self._ids.next_id(kind), kind))
            window = self._open
            assert window is not None
        window.message.text.append(delta)
        if kind == "text":
            events.append(self._delta(window, TextEvent, _text(delta), "append"))
        else:
            events.append(self._delta(window, ThinkingEvent, _thinking(delta), "append"))
        return events

    def _tool_delta(self, tool_id: str, delta: ExecuteProps) -> list[Event]:
        """Merge `delta` into the running tool and emit it."""
        self._live()
        message = self._tools.get(tool_id)
        if message is None:
            raise ProtocolError([f"tool {tool_id!r} is not running"])
        events = self._loading_done()
        events += self._focus(message)
        assert self._open is not None
        message.props = message.tool_props().merged(delta)
        events.append(self._execute(self._open, delta))
        return events

    def _focus(self, message: Message) -> list[Event]:
        """Make `message` the open window, closing another one and (re)opening this one."""
        window = self._open
        if window is not None and window.message is message:
            return []
        events: list[Event] = [] if window is None else [self._end(window, "completed")]
        self._open = Window(message, self._clock())
        events.append(self._event(_message_start(message.message_id, message.type)))
        return events

    def _close(self, status: StreamStatus) -> list[Event]:
        if self._open is None:
            return []
        return [self._end_open(status)]

    def _end_open(self, status: StreamStatus) -> LifecycleEvent:
        """Close the open window (there is one)."""
        window, self._open = self._open, None
        assert window is not None
        return self._end(window, status)

    def _end(self, window: Window, status: StreamStatus) -> LifecycleEvent:
        message = window.message
        content = message.content()
        if isinstance(content, ExecuteProps):
            content = settled(content)
        props = _message_end(
            message.message_id,
            message.type,
            status,
            content,
            max(0, self._clock() - window.opened_ms),
            window.chunks,
        )
        return self._event(props)

    def _delta(
        self,
        window: Window,
        cls: type[TextEvent] | type[ThinkingEvent] | type[ToolCallEvent] | type[LoadingEvent],
        props: TextProps | ThinkingProps | ToolCallProps | LoadingProps,
        action: str,
    ) -> Event:
        window.chunks += 1
        return _deltas[cls](self._thread_id, window.message.message_id, self._ids.next_id("c"), action, props)

    def _execute(self, window: Window, props: ExecuteProps) -> ExecuteEvent:
        window.chunks += 1
        message = window.message  # only tool messages reach here: its type is an `ExecuteType`
        chunk_id = self._ids.next_id("c")
        return _execute_delta(message.type, self._thread_id, message.message_id, chunk_id, props)
