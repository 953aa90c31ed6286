"""`opencode run --format json` lines -> protocol events.

Each line is `{type, timestamp, sessionID, part|error}` with `type` one of `step_start`, `text`
(a whole text part, no deltas), `reasoning` (with `--thinking`), `tool_use` (a tool part once
`completed` or `error`: there is no running state in this format), `step_finish` (tokens and
cost of one model call) and `error`. A tool therefore shows as running and finished at once.
"""

from __future__ import annotations

from typing import Any

import structlog

from orchestrator.stream import Event, TurnBuilder
from runners.lines import json_object
from runners.opencode.ledger import LedgerTranslator, TurnLedger
from runners.opencode.parts import RUNNER, as_dict, semantic_type, summary, tool_input, tool_result

log = structlog.get_logger(__name__)


class RunTranslator(LedgerTranslator):
    """Translator for one `opencode run` turn (see `runners.base.Translator`)."""

    def __init__(self, builder: TurnBuilder, resume: dict[str, str] | None = None) -> None:
        self._builder = builder
        self._ledger = TurnLedger(builder, dict(resume or {}))

    def feed(self, line: str) -> list[Event]:
        message = json_object(line, runner="opencode")
        if message is None or not isinstance(message.get("type"), str):
            return []
        self._ledger.seen_output = True
        self._ledger.note_session(message.get("sessionID"))
        return self._translate(message["type"], message)

    def _translate(self, kind: str, message: dict[str, Any]) -> list[Event]:
        part = as_dict(message.get("part"))
        if kind == "step_start":
            self._ledger.step_started()
            return []
        if kind == "text":
            value = part.get("text")
            if isinstance(value, str) and value:
                self._ledger.answer.append(value)
                return self._builder.text(value)
            return []
        if kind == "reasoning":
            value = part.get("text")
            return self._builder.thinking(value) if isinstance(value, str) else []
        if kind == "tool_use":
            return self._tool(part, message)
        if kind == "step_finish":
            self._ledger.step_finished(part)
            return []
        if kind == "error":
            return self._ledger.fail(message.get("error"))
        return self._builder.raw(kind, message, runner=RUNNER)

    def _tool(self, part: dict[str, Any], message: dict[str, Any]) -> list[Event]:
        state = as_dict(part.get("state"))
        call_id, tool = part.get("callID") or part.get("id"), part.get("tool")
        if state.get("status") not in ("completed", "error") or not isinstance(call_id, str):
            return self._builder.raw("tool_use", message, runner=RUNNER)
        name = tool if isinstance(tool, str) else "unknown"
        given = tool_input(state)
        events = self._builder.tool_started(
            call_id,
            name,
            given,
            runner=RUNNER,
            semantic_type=semantic_type(name),
            summary=summary(name, given, state.get("title")),
        )
        output, is_error, exit_code = tool_result(state)
        return events + self._builder.tool_finished(call_id, output, is_error=is_error, exit_code=exit_code)

    def close(self, exit_code: int | None, stderr_tail: str, *, cancelled: bool = False) -> list[Event]:
        return self._ledger.close(exit_code, stderr_tail, cancelled=cancelled)
