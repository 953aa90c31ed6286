"""`ClaudeTranslator`: Claude Code `--output-format stream-json` lines -> protocol events.

Sans-I/O (STYLE R6): it holds the turn's state and talks only to its `TurnBuilder`.

With `--include-partial-messages` Claude Code prints the model's raw SSE events (`stream_event`)
and, per finished content block, an `assistant` line repeating that block whole — it comes
after the block's deltas and before its `content_block_stop`. Text and thinking are emitted
from the deltas; the whole block only fills in what the deltas missed (nothing, normally, and
everything when partial messages are off). Tool runs start at `content_block_start`, stream
their input JSON, get their whole input and summary from the `assistant` line, and finish at
the `tool_result` in the next `user` line. `result` ends the turn.

When the turn asks Cage (`--permission-prompt-tool stdio`), a `control_request` line
(`can_use_tool`) becomes a `ControlRequest` the bridge drains with `take_requests()` (see
`runners.claude.permissions`); the CLI holds the tool call until the bridge writes the reply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog
from pydantic import JsonValue

from orchestrator.errors import STDERR_TAIL, ProtocolError
from orchestrator.redaction import redact
from orchestrator.stream import Event, StreamStatus, TurnBuilder, Usage
from runners.base import ControlQueue, ControlRequest, OutcomeOnClose, TurnOutcome
from runners.claude.payload import clip, raw_payload, tool_output
from runners.claude.permissions import control_request
from runners.claude.session import RESUME_KEY
from runners.claude.tools import semantic_type, summarize
from runners.claude.usage import turn_usage
from runners.lines import json_object

log = structlog.get_logger(__name__)

RUNNER = "claude"
INTERRUPT_REQUEST_ID = "cage-interrupt"
"""`request_id` of the stdin interrupt Cage sends (see `ClaudeAdapter.cancel`)."""
_INTERRUPTED = "[Request interrupted by user"
_TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})

BlockKind = Literal["text", "thinking", "tool", "other"]


@dataclass
class _Block:
    """One content block streaming through `stream_event`s."""

    kind: BlockKind
    tool_id: str | None = None
    tool: str = ""
    parts: list[str] = field(default_factory=list)
    settled: bool = False
    """The whole block arrived in an `assistant` line: later deltas are not shown again."""


@dataclass
class _Ending:
    """What the `result` line said about the end of the turn."""

    status: StreamStatus
    error: str | None
    stop_reason: str | None
    usage: Usage


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ClaudeTranslator(OutcomeOnClose, ControlQueue):
    """Claude Code stream-json lines -> protocol events through `builder`. No I/O."""

    def __init__(self, builder: TurnBuilder, *, session_id: str | None = None) -> None:
        self._b = builder
        self._session_id = session_id
        self._resume: tuple[str | None, dict[str, str]] = (None, {})
        """`resume_state` and the session id it was made from (the bridge asks after every line)."""
        self._out: list[Event] = []
        self._finished = False
        self._interrupted = False
        self._api_error: str | None = None
        self._ending: _Ending | None = None
        self._message_ids: dict[str | None, str] = {}
        """Id of the message streaming now, per sub-agent (`parent_tool_use_id`, None: main)."""
        self._blocks: dict[tuple[str | None, int], _Block] = {}
        self._streamed: dict[str, list[_Block]] = {}
        """Text and thinking blocks streamed per message id, in order."""
        self._done_tools: set[str] = set()
        self._known_inputs: set[str] = set()
        self._requests: list[ControlRequest] = []

    # -- the Translator protocol ----------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def resume_state(self) -> dict[str, str]:
        session, cached = self._session_id, self._resume
        if cached[0] is not session:
            cached = self._resume = (session, {RESUME_KEY: session} if session else {})
        return cached[1]

    def feed(self, line: str) -> list[Event]:
        """Translate one stdout line. Blank, non-JSON and non-object lines are skipped."""
        message = json_object(line, runner="claude")
        if message is None:
            return []
        self._out = []
        try:
            self._translate(message)
        except (KeyError, TypeError, ValueError, AttributeError, ProtocolError) as exc:
            # A newer CLI with a shape we did not expect: keep what was built (so the builder's
            # windows and the emitted events agree) and go on with the next line.
            log.warning("claude.line_failed", type=message.get("type"), error=redact(str(exc)))
        return self._out

    def close(self, exit_code: int | None, stderr_tail: str, *, cancelled: bool = False) -> list[Event]:
        """The process ended. Emits the error the turn ended with, if any, and sets `outcome`."""
        if self._outcome is not None:
            return []
        self._out = []
        tail = redact(stderr_tail.strip())[-STDERR_TAIL:]
        ending = self._ending
        if ending is not None:
            error = ending.error
            if ending.status == "error" and tail:
                error = f"{error}\nstderr: {tail}"
            self._outcome = TurnOutcome(
                status=ending.status, error=error, stop_reason=ending.stop_reason, usage=ending.usage
            )
            return self._out
        if cancelled or self._interrupted:
            self._outcome = TurnOutcome(status="cancelled", usage=self._b.turn_usage)
            return self._out
        if self._api_error is not None:
            message = self._api_error
        elif exit_code is None:
            message = "Claude Code was killed before it reported a result"
        elif exit_code == 0:
            message = "Claude Code exited without reporting a result"
        else:
            message = f"Claude Code exited with code {exit_code}"
        if tail:
            message = f"{message}: {tail}"
        self._emit(self._b.close_open_messages("error"))
        self._emit(self._b.error(message, "runner_failed", {"exit_code": exit_code}))
        self._outcome = TurnOutcome(status="error", error=redact(message), usage=self._b.turn_usage)
        return self._out

    # -- dispatch -------------------------------------------------------------------------------

    def _emit(self, events: list[Event]) -> None:
        self._out.extend(events)

    def _translate(self, message: dict[str, Any]) -> None:
        if self._session_id is None:
            self._session_id = _str(message.get("session_id")) or None
        match message.get("type"):
            case "stream_event":  # most lines: their fields read without a helper call each
                event, parent = message.get("event"), message.get("parent_tool_use_id")
                self._stream_event(
                    event if isinstance(event, dict) else {}, parent if isinstance(parent, str) else None
                )
            case "assistant":
                self._assistant(message)
            case "user":
                self._user(message)
            case "system":
                self._system(message)
            case "result":
                self._result(message)
            case "control_request":
                request = control_request(message)
                if request is None:
                    self._raw("control_request", message)
                else:
                    self._requests.append(request)
            case "control_response":
                response = _dict(message.get("response"))
                if response.get("request_id") == INTERRUPT_REQUEST_ID:
                    self._interrupted = True
            case "error":
                text = _str(message.get("message")) or _str(_dict(message.get("error")).get("message"))
                self._api_error = text or "Claude Code reported an error"
            case other:
                self._raw(str(other) if other is not None else "unknown", message)

    def _raw(self, raw_type: str, message: Any) -> None:
        log.debug("claude.raw", type=raw_type)
        self._emit(self._b.raw(raw_type, raw_payload(message)))

    # -- system ---------------------------------------------------------------------------------

    def _system(self, message: dict[str, Any]) -> None:
        subtype = _str(message.get("subtype")) or "unknown"
        if subtype == "init":
            if session := _str(message.get("session_id")):
                self._session_id = session
            servers = message.get("mcp_servers")
            failed = [
                s
                for s in servers or []
                if isinstance(s, dict) and s.get("status") in ("failed", "needs-auth")
            ]
            if failed:
                self._raw("system/init", {"mcp_servers": failed})
        elif subtype in ("status", "thinking_tokens"):
            # "requesting" before every model call, and a token estimate per thinking delta:
            # noise next to the deltas themselves.
            status = message.get("status")
            if subtype == "status" and status == "compacting":
                self._emit(self._b.loading("Compacting the conversation…"))
            elif subtype == "status" and status not in (None, "requesting"):
                self._raw("system/status", message)
        elif subtype == "api_retry":
            status = _int(message.get("error_status"))
            reason = _str(message.get("error")) or "error"
            attempt, most = _int(message.get("attempt")), _int(message.get("max_retries"))
            what = f"{status} {reason}" if status is not None else reason
            self._emit(self._b.loading(f"Model API error ({what}); retrying {attempt}/{most}…"))
        else:
            self._raw(f"system/{subtype}", message)

    # -- partial messages -----------------------------------------------------------------------

    def _stream_event(self, event: dict[str, Any], parent: str | None) -> None:
        kind = event.get("type")
        index = event.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = None
        if kind == "message_start":
            message_id = _str(_dict(event.get("message")).get("id"))
            if message_id:
                self._message_ids[parent] = message_id
                self._streamed.setdefault(message_id, [])
        elif kind == "content_block_start" and index is not None:
            self._block_start(parent, index, _dict(event.get("content_block")))
        elif kind == "content_block_delta" and index is not None:
            delta = event.get("delta")
            self._block_delta(parent, index, delta if isinstance(delta, dict) else {})
        elif kind == "content_block_stop" and index is not None:
            self._block_stop(self._blocks.pop((parent, index), None))
        elif kind == "message_stop":
            for key in [k for k in self._blocks if k[0] == parent]:
                self._block_stop(self._blocks.pop(key))
        elif kind not in ("message_delta", "ping"):
            self._raw(f"stream_event/{kind}", event)

    def _block_start(self, parent: str | None, index: int, content: dict[str, Any]) -> None:
        kind = content.get("type")
        if kind in ("text", "thinking"):
            block = _Block(kind)
            self._blocks[(parent, index)] = block
            message_id = self._message_ids.get(parent)
            if message_id is not None:
                self._streamed.setdefault(message_id, []).append(block)
            initial = _str(content.get(kind))
            if initial:
                self._stream_text(block, initial)
        elif kind in _TOOL_BLOCKS:
            tool_id, name = _str(content.get("id")), _str(content.get("name"))
            if tool_id and name:
                self._blocks[(parent, index)] = _Block("tool", tool_id=tool_id, tool=name)
                self._start_tool(tool_id, name, None, parent)
        else:
            self._blocks[(parent, index)] = _Block("other")

    def _block_delta(self, parent: str | None, index: int, delta: dict[str, Any]) -> None:
        kind = delta.get("type")
        block = self._blocks.get((parent, index))
        if kind in ("text_delta", "thinking_delta"):
            text = _str(delta.get("text" if kind == "text_delta" else "thinking"))
            if block is None:  # a delta without its start: stream it all the same
                block = _Block("text" if kind == "text_delta" else "thinking")
                self._blocks[(parent, index)] = block
                message_id = self._message_ids.get(parent)
                if message_id is not None:
                    self._streamed.setdefault(message_id, []).append(block)
            if text:
                self._stream_text(block, text)
        elif kind == "input_json_delta" and block is not None and block.tool_id is not None:
            fragment = delta.get("partial_json")
            if not isinstance(fragment, str):
                fragment = None
            block.parts.append(fragment or "")
            if fragment and self._b.is_running(block.tool_id) and block.tool_id not in self._known_inputs:
                self._emit(self._b.tool_input_delta(block.tool_id, fragment))

    def _stream_text(self, block: _Block, text: str) -> None:
        block.parts.append(text)
        if block.settled:
            return
        self._emit(self._b.text(text) if block.kind == "text" else self._b.thinking(text))

    def _block_stop(self, block: _Block | None) -> None:
        """A tool's input finished streaming; if no whole `assistant` copy gave it, parse it."""
        if block is None or block.tool_id is None or block.tool_id in self._known_inputs:
            return
        if not self._b.is_running(block.tool_id):
            return
        try:
            value = json.loads("".join(block.parts) or "{}")
        except json.JSONDecodeError:
            return
        self._known_inputs.add(block.tool_id)
        self._emit(self._b.tool_updated(block.tool_id, input=value, summary=summarize(block.tool, value)))

    # -- whole messages -------------------------------------------------------------------------

    def _assistant(self, message: dict[str, Any]) -> None:
        body = _dict(message.get("message"))
        content = body.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        if message.get("error"):
            # A synthetic message carrying a model API error; the `result` line reports it.
            texts = [b.get("text") for b in blocks if isinstance(b.get("text"), str)]
            self._api_error = "\n".join(t for t in texts if t) or str(message["error"])
            return
        message_id = _str(body.get("id")) or ""
        parent = _str(message.get("parent_tool_use_id"))
        for block in blocks:
            kind = block.get("type")
            if kind in ("text", "thinking"):
                text = _str(block.get(kind))
                if text:
                    self._whole_text(message_id, kind, text)
            elif kind in _TOOL_BLOCKS:
                tool_id, name = _str(block.get("id")), _str(block.get("name"))
                if tool_id and name:
                    self._start_tool(tool_id, name, block.get("input"), parent, whole=True)
            elif kind is not None and str(kind).endswith("_tool_result"):
                tool_id = _str(block.get("tool_use_id"))
                if tool_id:
                    self._finish_tool(tool_id, block.get("content"), is_error=False)
            elif kind != "redacted_thinking":
                self._raw(f"assistant/{kind}", block)

    def _whole_text(self, message_id: str, kind: str, text: str) -> None:
        """A whole text/thinking block: show only what its streamed deltas did not."""
        for block in self._streamed.get(message_id, []):
            if block.kind == kind and not block.settled:
                block.settled = True
                streamed = "".join(block.parts)
                if text.startswith(streamed) and len(text) > len(streamed):
                    self._stream_missing(kind, text[len(streamed) :])
                return
        self._stream_missing(kind, text)

    def _stream_missing(self, kind: str, text: str) -> None:
        self._emit(self._b.text(text) if kind == "text" else self._b.thinking(text))

    def _start_tool(
        self, tool_id: str, name: str, input: Any, parent: str | None, *, whole: bool = False
    ) -> None:
        if tool_id in self._done_tools:
            return
        value: JsonValue = input if whole else None
        summary = summarize(name, value) if whole else None
        if whole:
            self._known_inputs.add(tool_id)
        if self._b.is_running(tool_id):
            self._emit(self._b.tool_updated(tool_id, input=value, summary=summary))
            return
        self._emit(
            self._b.tool_started(
                tool_id,
                name,
                value,
                semantic_type=semantic_type(name),
                summary=summary,
                parent_tool_use_id=parent,
            )
        )

    def _user(self, message: dict[str, Any]) -> None:
        if message.get("isReplay"):
            return
        content = _dict(message.get("message")).get("content")
        if isinstance(content, str):
            self._note_interrupt(content)
            return
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                self._finish_tool(
                    block["tool_use_id"], block.get("content"), is_error=bool(block.get("is_error"))
                )
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                self._note_interrupt(block["text"])

    def _note_interrupt(self, text: str) -> None:
        if text.startswith(_INTERRUPTED):
            self._interrupted = True

    def _finish_tool(self, tool_id: str, content: Any, *, is_error: bool) -> None:
        if tool_id in self._done_tools:
            return
        self._done_tools.add(tool_id)
        self._emit(self._b.tool_finished(tool_id, tool_output(content), is_error=is_error))

    # -- the end --------------------------------------------------------------------------------

    def _result(self, message: dict[str, Any]) -> None:
        self._finished = True
        if session := _str(message.get("session_id")):
            self._session_id = session
        subtype = _str(message.get("subtype")) or "unknown"
        is_error = bool(message.get("is_error")) or subtype != "success"
        terminal = _str(message.get("terminal_reason")) or ""
        # `terminal_reason` says more than the model's `stop_reason` when the turn was cut short
        # (`aborted_tools`, `aborted_streaming`); it is `completed` otherwise.
        stop_reason = (terminal if terminal not in ("", "completed") else None) or _str(
            message.get("stop_reason")
        )
        usage = turn_usage(message)
        text = _str(message.get("result"))
        self._emit(self._b.close_open_messages())
        self._emit(self._b.usage(usage))
        self._emit(
            self._b.result(
                result=redact(clip(text)) if text is not None else None,
                is_error=is_error,
                num_turns=_int(message.get("num_turns")),
                duration_ms=_int(message.get("duration_ms")),
                stop_reason=stop_reason,
                cost_usd=usage.cost_usd,
                usage=usage,
                runner_session_id=self._session_id,
            )
        )
        if self._interrupted or terminal.startswith("aborted"):
            self._ending = _Ending("cancelled", None, stop_reason, usage)
            return
        if not is_error:
            self._ending = _Ending("completed", None, stop_reason, usage)
            return
        error, code, details = self._failure(message, subtype, text)
        self._emit(self._b.error(error, code, details))
        self._ending = _Ending("error", redact(error), stop_reason, usage)

    def _failure(
        self, message: Mapping[str, Any], subtype: str, text: str | None
    ) -> tuple[str, str, dict[str, JsonValue]]:
        """The error message, code and details of a failed `result`."""
        status = _int(message.get("api_error_status"))
        if status is not None:
            return (
                text or self._api_error or f"model API error {status}",
                "model_api_error",
                {"status": status},
            )
        if subtype == "error_max_turns":
            turns = _int(message.get("num_turns"))
            return f"Claude Code stopped after {turns} turns (max_turns)", "max_turns", {"num_turns": turns}
        errors = [e for e in message.get("errors") or [] if isinstance(e, str)]
        error = text or "; ".join(errors) or self._api_error or f"Claude Code reported {subtype}"
        return error, "runner_failed", {"subtype": subtype}
