"""`TaiTranslator`: `cage-tai run` prints protocol events already; this re-sequences them.

Each stdout line is one unstamped event. The translator

* drops tai's own root `stream_start`/`stream_end` (the pipeline emits the turn's own) and takes
  the outcome, error and usage from that `stream_end`;
* passes every other event through unchanged (sub-agent threads included), with any envelope
  stamp cleared so the session emitter numbers it;
* surfaces a line that is not a protocol event as `raw`;
* turns tai's control lines (a tool call or a question waiting for Cage, `runners.tai.control`)
  into `ControlRequest`s the bridge drains with `take_requests()`;
* when tai dies without its `stream_end` (killed, crashed), closes what it left open: windows
  get their `message_end`, running tools an error result, threads their `stream_end`, so the
  session stream stays valid.
"""

from __future__ import annotations

import json

import structlog
from pydantic import JsonValue, ValidationError

from orchestrator.redaction import redact
from orchestrator.stream import (
    ContentType,
    Event,
    ExecuteEvent,
    ExecuteProps,
    ExecuteType,
    LifecycleEvent,
    MessageEnd,
    MessageStart,
    ResultSummary,
    StreamEnd,
    StreamStart,
    StreamStatus,
    TurnBuilder,
    parse_event,
)
from runners.base import ControlQueue, ControlRequest, OutcomeOnClose, TurnOutcome, TurnRequest
from runners.tai.control import CONTROL_KEY, control_request

log = structlog.get_logger(__name__)

RUNNER = "tai"
RAW_LIMIT = 4000
"""Characters of an unparsable line kept in its `raw` event."""
EXIT_INTERRUPTED = 130
RESUME_KEY = "turn_id"


class TaiTranslator(OutcomeOnClose, ControlQueue):
    """Translator for one `cage-tai run` turn (see the module docstring)."""

    def __init__(self, builder: TurnBuilder, turn: TurnRequest) -> None:
        self._builder = builder
        self._turn_id = turn.turn_id
        self._end: StreamEnd | None = None
        self._windows: dict[str, tuple[ContentType, str | None]] = {}
        """Open message windows: message_id -> (type, thread_id)."""
        self._tools: dict[str, tuple[ExecuteType, str | None, str]] = {}
        """Tools running: message_id -> (type, thread_id, tool_id)."""
        self._threads: set[str] = set()
        self._chunks = 0
        self._stop: str | None = None
        """The loop's stop reason, from tai's `result/summary`."""
        self._requests: list[ControlRequest] = []

    @property
    def finished(self) -> bool:
        return self._end is not None

    @property
    def resume_state(self) -> dict[str, str]:
        """The turn whose checkpoint the next turn starts from (only after a completed turn)."""
        if self._end is not None and self._end.status == "completed":
            return {RESUME_KEY: self._turn_id}
        return {}

    def feed(self, line: str) -> list[Event]:
        text = line.strip()
        if not text:
            return []
        if text.startswith('{"' + CONTROL_KEY):
            return self._control(text)
        try:
            event = parse_event(text)
        except ValidationError:
            return self._raw(text)
        if event.seq or event.ts or event.session_id or event.turn_id:
            event = event.model_copy(update={"seq": 0, "ts": 0, "session_id": "", "turn_id": ""})
        if isinstance(event, LifecycleEvent) and event.thread_id is None:
            if isinstance(event.props, StreamStart):
                return []
            if isinstance(event.props, StreamEnd):
                self._end = event.props
                return []
            if isinstance(event.props, ResultSummary):
                self._stop = event.props.stop_reason
        self._track(event)
        return [event]

    def close(self, exit_code: int | None, stderr_tail: str, *, cancelled: bool = False) -> list[Event]:
        if self._outcome is not None:
            return []
        end = self._end
        if end is not None:
            self._outcome = TurnOutcome(
                status=end.status, error=end.error, stop_reason=self._stop or end.status, usage=end.usage
            )
            return self._settle(end.status)
        if cancelled or exit_code == EXIT_INTERRUPTED:
            self._outcome = TurnOutcome(status="cancelled", stop_reason="cancelled")
            return self._settle("cancelled")
        code = "killed" if exit_code is None else f"exit code {exit_code}"
        tail = redact(stderr_tail.strip())
        message = f"cage-tai ended ({code}) without finishing its stream" + (f": {tail}" if tail else "")
        events = self._settle("error")
        events += self._builder.error(message, "runner_exit", {"exit_code": exit_code})
        self._outcome = TurnOutcome(status="error", error=message, stop_reason="error")
        return events

    # -- bookkeeping ---------------------------------------------------------------------------

    def _track(self, event: Event) -> None:
        if isinstance(event, LifecycleEvent):
            props = event.props
            if isinstance(props, MessageStart):
                self._windows[props.message_id] = (props.type, event.thread_id)
            elif isinstance(props, MessageEnd):
                self._windows.pop(props.message_id, None)
            elif isinstance(props, StreamStart) and event.thread_id is not None:
                self._threads.add(event.thread_id)
            elif isinstance(props, StreamEnd) and event.thread_id is not None:
                self._threads.discard(event.thread_id)
        elif isinstance(event, ExecuteEvent) and event.message_id is not None:
            status = event.props.status
            if status == "running":
                self._tools[event.message_id] = (event.type, event.thread_id, event.props.tool_id)
            elif status in ("completed", "error"):
                self._tools.pop(event.message_id, None)

    def _settle(self, status: StreamStatus) -> list[Event]:
        """Close what tai left open: windows, then running tools, then sub-agent threads."""
        events: list[Event] = []
        for message_id, (kind, thread) in list(self._windows.items()):
            end = MessageEnd(message_id=message_id, type=kind, status=status)
            events.append(LifecycleEvent(thread_id=thread, props=end))
        self._windows.clear()
        for message_id, (kind, thread, tool_id) in list(self._tools.items()):
            props = ExecuteProps(
                tool_id=tool_id, output=f"tool did not finish: turn {status}", status="error", is_error=True
            )
            self._chunks += 1
            events += [
                LifecycleEvent(thread_id=thread, props=MessageStart(message_id=message_id, type=kind)),
                ExecuteEvent(
                    type=kind,
                    thread_id=thread,
                    message_id=message_id,
                    chunk_id=f"tai-settle-{self._chunks}",
                    delta=True,
                    delta_action="merge",
                    props=props,
                ),
                LifecycleEvent(
                    thread_id=thread,
                    props=MessageEnd(message_id=message_id, type=kind, status=status, content=props),
                ),
            ]
        self._tools.clear()
        for thread in sorted(self._threads):
            events.append(LifecycleEvent(thread_id=thread, props=StreamEnd(status=status)))
        self._threads.clear()
        return events

    def _control(self, text: str) -> list[Event]:
        try:
            value = json.loads(text)
        except ValueError:
            return self._raw(text)
        request = control_request(value, RUNNER) if isinstance(value, dict) else None
        if request is None:
            return self._raw(text)
        self._requests.append(request)
        return []

    def _raw(self, text: str) -> list[Event]:
        log.debug("tai.unparsed_line", size=len(text))
        try:
            json.loads(text)
            raw_type = "invalid_event"
        except ValueError:
            raw_type = "text"
        kept = redact(text[:RAW_LIMIT])
        payload: dict[str, JsonValue] = {"line": kept}
        if len(text) > RAW_LIMIT:
            payload["omitted_chars"] = len(text) - RAW_LIMIT
        return self._builder.raw(raw_type, payload, runner=RUNNER)
