"""`opencode serve` events (as printed by the serve driver) -> protocol events.

Each line is one `/event` SSE payload `{id, type, properties}` of the turn's session, or one of
the driver's own `cage.driver.*` lines. Unlike `opencode run`, this stream has text and
reasoning deltas (`message.part.delta`) and the `pending` -> `running` -> `completed`/`error`
states of every tool. A part's final `message.part.updated` repeats its whole text: only the
part not yet sent as deltas is emitted, so no text appears twice. The user's own prompt comes
back as a text part of the user message and is skipped.

When Cage decides tool calls (`asking`), `permission.asked` and `question.asked` become control
requests (`take_requests`, see `runners.opencode.asks`) instead of raw events, and their
`*.replied` / `question.rejected` echoes are dropped (the broker's `permission/*` and `question`
events tell the client).
"""

from __future__ import annotations

import re
from typing import Any

import structlog

from orchestrator.stream import Event, TurnBuilder
from runners.base import ControlQueue, ControlRequest
from runners.lines import json_object
from runners.opencode.asks import permission_asks, question_asks
from runners.opencode.ledger import LedgerTranslator, TurnLedger
from runners.opencode.parts import RUNNER, as_dict, semantic_type, summary, tool_input, tool_result

log = structlog.get_logger(__name__)
IGNORED = frozenset(
    {
        "session.updated",
        "session.created",
        "session.diff",
        "file.edited",
        "file.watcher.updated",
        "server.connected",
    }
)
"""Bookkeeping events with nothing for a client (what they say shows elsewhere in the stream)."""
ANSWERED = frozenset({"permission.replied", "question.replied", "question.rejected"})
_HEAD = re.compile(r'\{"id":"[^"\\]*","type":"([a-z.]+)",')
"""The start of a line as opencode prints it: `id`, then the top-level `type` (no escapes)."""


def makes_nothing(line: str) -> bool:
    """True for a line that certainly makes no event and changes no state, known without parsing it.

    Most of a serve stream is bookkeeping (`session.updated`, `session.diff`, an assistant's
    `message.updated`, a `busy` status: about 60% of the lines, the largest ones): the line's head
    names the type, and for the two types that matter only in one case, the text cannot hold that
    case (`user` / `idle` / `retry` absent, and no `\\u` escape that could spell them). Anything
    else, a line opencode did not print in its compact form included, is parsed in full. (A line
    with such a head that is not valid JSON counts as output here, as nothing in a full parse.)
    """
    head = _HEAD.match(line)
    if head is None or not line.endswith("}"):
        return False
    kind = head.group(1)
    if kind in IGNORED:
        return True
    if kind == "message.updated":
        return "user" not in line and "\\u" not in line
    if kind == "session.status":
        return "idle" not in line and "retry" not in line and "\\u" not in line
    return False


class ServeTranslator(LedgerTranslator, ControlQueue):
    """Translator for one turn driven through `opencode serve` (see `runners.base.Translator`)."""

    def __init__(
        self,
        builder: TurnBuilder,
        resume: dict[str, str] | None = None,
        *,
        asking: bool = False,
        mcp_servers: dict[str, str] | None = None,
        workdir: str = "/workspace",
    ) -> None:
        self._builder = builder
        self._asking = asking
        self._mcp_servers = dict(mcp_servers or {})
        """Config key -> MCP server id (opencode names the tools `<key>_<tool>`)."""
        self._workdir = workdir
        self._requests: list[ControlRequest] = []
        self._names: dict[str, str] = {}
        """call id -> tool name."""
        self._ledger = TurnLedger(builder, dict(resume or {}))
        self._user_messages: set[str] = set()
        self._kinds: dict[str, str] = {}
        """part id -> `text` | `reasoning`, for deltas."""
        self._sent: dict[str, str] = {}
        """part id -> the text already emitted for it."""
        self._tools: dict[str, Any] = {}
        """call id -> the last input reported for it."""

    def feed(self, line: str) -> list[Event]:
        if makes_nothing(line):
            self._ledger.seen_output = True
            return []
        message = json_object(line, runner="opencode")
        if message is None or not isinstance(message.get("type"), str):
            return []
        self._ledger.seen_output = True
        props = as_dict(message.get("properties"))
        return self._translate(message["type"], props, message)

    def _translate(self, kind: str, props: dict[str, Any], message: dict[str, Any]) -> list[Event]:
        if kind == "message.part.delta":
            return self._delta(props)
        if kind == "message.part.updated":
            return self._part(as_dict(props.get("part")), message)
        if kind == "message.updated":
            info = as_dict(props.get("info"))
            if info.get("role") == "user" and isinstance(info.get("id"), str):
                self._user_messages.add(info["id"])
            return []
        if kind == "session.status":
            return self._status(as_dict(props.get("status")))
        if kind == "session.idle":
            self._ledger.finished = True
            return []
        if kind == "session.error":
            return self._ledger.fail(props.get("error"))
        if kind == "cage.driver.session":
            self._ledger.note_session(props.get("sessionID"))
            return []
        if kind == "cage.driver.error":
            return self._ledger.driver_error(props)
        if kind == "cage.driver.abort":
            log.info("opencode.serve.abort_requested", ok=props.get("ok"))
            return []
        if kind in IGNORED:
            return []
        if self._asking:
            if kind == "permission.asked":
                self._requests += permission_asks(
                    props,
                    tool_names=self._names,
                    tool_inputs=self._tools,
                    mcp_servers=self._mcp_servers,
                    workdir=self._workdir,
                )
                return []
            if kind == "question.asked":
                self._requests += question_asks(props)
                return []
            if kind in ANSWERED:
                return []
        return self._builder.raw(kind, message, runner=RUNNER)

    def _status(self, status: dict[str, Any]) -> list[Event]:
        kind = status.get("type")
        if kind == "idle":
            self._ledger.finished = True
        elif kind == "retry":
            attempt, why = status.get("attempt"), status.get("message")
            return self._builder.loading(f"retrying the model call (attempt {attempt}): {why}")
        return []

    def _delta(self, props: dict[str, Any]) -> list[Event]:
        part_id, delta = props.get("partID"), props.get("delta")
        if props.get("field") != "text" or not isinstance(part_id, str) or not isinstance(delta, str):
            return self._builder.raw("message.part.delta", props, runner=RUNNER)
        if props.get("messageID") in self._user_messages:
            return []
        self._sent[part_id] = self._sent.get(part_id, "") + delta
        if self._kinds.get(part_id) == "reasoning":
            return self._builder.thinking(delta)
        self._ledger.answer.append(delta)
        return self._builder.text(delta)

    def _part(self, part: dict[str, Any], message: dict[str, Any]) -> list[Event]:
        kind, part_id = part.get("type"), part.get("id")
        if part.get("messageID") in self._user_messages or part.get("synthetic") is True:
            return []
        if kind in ("text", "reasoning") and isinstance(part_id, str):
            return self._text_part(kind, part_id, part)
        if kind == "tool":
            return self._tool(part, message)
        if kind == "step-start":
            self._ledger.step_started()
            return []
        if kind == "step-finish":
            self._ledger.step_finished(part)
            return []
        return self._builder.raw(f"part.{kind}", message, runner=RUNNER)

    def _text_part(self, kind: str, part_id: str, part: dict[str, Any]) -> list[Event]:
        """Remember the part's kind; emit whatever of its full text the deltas did not carry."""
        self._kinds[part_id] = kind
        full = part.get("text")
        sent = self._sent.get(part_id, "")
        if not isinstance(full, str) or not full.startswith(sent) or len(full) == len(sent):
            return []
        rest = full[len(sent) :]
        self._sent[part_id] = full
        if kind == "reasoning":
            return self._builder.thinking(rest)
        self._ledger.answer.append(rest)
        return self._builder.text(rest)

    def _tool(self, part: dict[str, Any], message: dict[str, Any]) -> list[Event]:
        state = as_dict(part.get("state"))
        call_id, tool, status = part.get("callID") or part.get("id"), part.get("tool"), state.get("status")
        if not isinstance(call_id, str):
            return self._builder.raw("part.tool", message, runner=RUNNER)
        name = tool if isinstance(tool, str) else "unknown"
        given = tool_input(state)
        events: list[Event] = []
        self._names[call_id] = name
        if call_id not in self._tools:
            self._tools[call_id] = given
            events += self._builder.tool_started(
                call_id,
                name,
                given,
                runner=RUNNER,
                semantic_type=semantic_type(name),
                summary=summary(name, given, state.get("title")),
            )
        elif given is not None and given != self._tools[call_id]:
            self._tools[call_id] = given
            events += self._builder.tool_updated(
                call_id, input=given, summary=summary(name, given, state.get("title"))
            )
        if status in ("completed", "error") and self._builder.is_running(call_id):
            output, is_error, exit_code = tool_result(state)
            events += self._builder.tool_finished(call_id, output, is_error=is_error, exit_code=exit_code)
        return events

    def close(self, exit_code: int | None, stderr_tail: str, *, cancelled: bool = False) -> list[Event]:
        return self._ledger.close(exit_code, stderr_tail, cancelled=cancelled)
