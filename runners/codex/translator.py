"""`codex exec --json` lines -> protocol events, through the turn's `TurnBuilder`. No I/O.

What codex prints (0.171.0): `thread.started{thread_id}`, `turn.started`, `item.started|updated|
completed{item}`, `turn.completed{usage}`, `turn.failed{error}` and top-level `error{message}`.

* `agent_message` and `reasoning` items arrive whole (there are no deltas in `--json`): each item
  is its own `text` / `thinking` message; an item seen again only adds what it did not have yet.
* Tool-like items (see `items.py`) become `execute` runs: `running` at `item.started`, `completed`
  or `error` at `item.completed`, one message id for both. A tool that only shows up completed
  still gets its running phase first.
* `error` *items* are warnings (e.g. "Model metadata for `x` not found", which every unknown model
  slug produces): forwarded as `runner/raw` with raw type `warning`, never an `error` event.
* Top-level `error`: `Reconnecting... n/m (...)` is a retry notice, shown as `loading`. Any other one
  is held: it is the fatal error when `turn.failed` or a bare exit follows, a warning when the turn
  completes after all.
* `turn.completed.usage` is cumulative over the thread; `ThreadTotals` makes it per turn.
* SIGINT makes codex exit 1 with no final event: with `cancelled=True` the outcome is `cancelled`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import structlog

from orchestrator.redaction import redact
from orchestrator.stream import Event, TurnBuilder, Usage
from runners.base import OutcomeOnClose, TurnOutcome, TurnRequest
from runners.codex.invocation import RESUME_KEY
from runners.codex.items import ToolView, clip, tool_view
from runners.codex.usage import ThreadTotals
from runners.lines import json_object

log = structlog.get_logger(__name__)

RUNNER = "codex"
RAW_LIMIT = 64 * 1024
"""A line longer than this that Cage does not understand is forwarded as a size note only."""
STOP_REASON = "end_turn"
_RETRY_NOTICE = "Reconnecting..."
_STDERR_NOISE = ("Reading additional input from stdin",)
_LOST_THREAD = "no rollout found for thread id"
_AUTH = re.compile(r"\b(401|403)\b|Unauthorized|Forbidden")
_RATE = re.compile(r"\b429\b|Too Many Requests|rate limit", re.IGNORECASE)

_State = Literal["running", "completed", "failed"]


def error_code(message: str) -> str:
    """A machine-readable code for a model API failure reported by codex."""
    if _AUTH.search(message):
        return "model_auth_failed"
    if _RATE.search(message):
        return "model_rate_limited"
    return "model_api_error"


def clean_stderr(tail: str) -> str:
    """codex's stderr without its stdin notice, redacted, trimmed to its last lines."""
    lines = [line for line in tail.splitlines() if line.strip() and not line.startswith(_STDERR_NOISE)]
    return redact("\n".join(lines)[-1000:])


def _exit(exit_code: int | None) -> str:
    return "without an exit code (killed)" if exit_code is None else f"with code {exit_code}"


class CodexTranslator(OutcomeOnClose):
    """Translates one codex turn. Holds the turn's state; `resume_state` carries the thread on."""

    def __init__(self, builder: TurnBuilder, turn: TurnRequest) -> None:
        self._builder = builder
        self._turn_id = turn.turn_id
        self._resumed = turn.resume.get(RESUME_KEY) or None
        self._previous = ThreadTotals.from_resume(turn.resume) if self._resumed else ThreadTotals()
        self._carried = {k: v for k, v in turn.resume.items() if k == RESUME_KEY or k.startswith("usage_")}
        self._thread_id: str | None = None
        self._totals: ThreadTotals | None = None
        self._state: _State = "running"
        self._error: str | None = None
        self._held: list[str] = []
        self._prose: dict[str, str] = {}
        self._open_prose: str | None = None
        self._last_text = ""
        self._tools: dict[str, ToolView] = {}
        self._done_tools: set[str] = set()
        self._usage: Usage | None = None
        self._lost_thread = False
        self._resume_revision = 0
        """Moved by each change of what `resume_state` is made from (`ResumeRevisions`): the bridge
        reads the state after the lines that move it, not after every line."""

    # -- the Translator protocol -------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return self._state != "running"

    @property
    def resume_revision(self) -> int:
        return self._resume_revision

    @property
    def resume_state(self) -> dict[str, str]:
        """`thread_id` and codex's cumulative counters after this turn (for the next subtraction).

        Made at each read, the reader's own: the bridge reads it only after the lines that moved
        `resume_revision`, not after every line."""
        if self._lost_thread:
            return {}
        if self._thread_id is None:
            return dict(self._carried)
        totals = self._totals or (self._previous if self._thread_id == self._resumed else ThreadTotals())
        return {RESUME_KEY: self._thread_id, **totals.to_resume()}

    def feed(self, line: str) -> list[Event]:
        message = json_object(line, runner="codex")
        if message is None:
            return []
        return self._translate(message, len(line))

    def close(self, exit_code: int | None, stderr_tail: str, *, cancelled: bool = False) -> list[Event]:
        if self._outcome is not None:
            return []
        events: list[Event] = []
        if self._state == "completed":
            self._outcome = TurnOutcome(status="completed", stop_reason=STOP_REASON, usage=self._usage)
        elif self._state == "failed":
            self._outcome = TurnOutcome(status="error", error=self._error, stop_reason="error")
        elif cancelled:
            self._outcome = TurnOutcome(status="cancelled", stop_reason="cancelled")
        else:
            message, code = self._exit_error(exit_code, clean_stderr(stderr_tail))
            events += self._builder.error(message, code, {"exit_code": exit_code})
            self._outcome = TurnOutcome(status="error", error=redact(message), stop_reason="error")
        return events

    # -- dispatch ----------------------------------------------------------------------------

    def _translate(self, message: dict[str, Any], size: int) -> list[Event]:
        kind = message.get("type")
        match kind:
            case "thread.started":
                return self._thread_started(message)
            case "turn.started":
                return []
            case "item.started" | "item.updated" | "item.completed":
                item = message.get("item")
                if isinstance(item, dict):
                    return self._item(kind.removeprefix("item."), item, size)
            case "turn.completed":
                return self._turn_completed(message)
            case "turn.failed":
                return self._turn_failed(message)
            case "error":
                return self._top_level_error(str(message.get("message") or ""))
        return self._raw(str(kind or "unknown"), message, size)

    def _raw(self, raw_type: str, payload: dict[str, Any], size: int) -> list[Event]:
        log.debug("codex.unknown_message", type=raw_type)
        if size > RAW_LIMIT:
            return self._builder.raw(raw_type, {"omitted_bytes": size}, runner=RUNNER)
        return self._builder.raw(raw_type, json.loads(json.dumps(payload)), runner=RUNNER)

    def _thread_started(self, message: dict[str, Any]) -> list[Event]:
        thread_id = message.get("thread_id")
        if isinstance(thread_id, str) and thread_id:
            self._thread_id = thread_id
            if thread_id != self._resumed:
                self._previous = ThreadTotals()
            self._resume_revision += 1
        return []

    # -- items -------------------------------------------------------------------------------

    def _item(self, phase: str, item: dict[str, Any], size: int) -> list[Event]:
        item_id = str(item.get("id") or "")
        kind = item.get("type")
        if kind == "agent_message":
            return self._prose_item(item_id, item.get("text"), "text", phase)
        if kind == "reasoning":
            return self._prose_item(item_id, item.get("text"), "thinking", phase)
        if kind == "error":
            if phase != "completed":
                return []
            return self._builder.raw("warning", {"message": str(item.get("message") or "")}, runner=RUNNER)
        view = tool_view(item)
        if view is None:
            return self._raw(f"item.{phase}", item, size)
        tool_id = f"{self._turn_id}:{item_id}"
        if tool_id in self._done_tools:
            log.debug("codex.item_after_completion", item_id=item_id)
            return []
        events: list[Event] = []
        if tool_id not in self._tools:
            events += self._builder.tool_started(
                tool_id, view.tool, view.input, semantic_type=view.semantic_type, summary=view.summary
            )
        elif phase == "updated":
            events += self._builder.tool_updated(tool_id, input=view.input, summary=view.summary)
        self._tools[tool_id] = view
        if phase == "completed":
            events += self._finish_tool(tool_id)
        return events

    def _finish_tool(self, tool_id: str) -> list[Event]:
        view = self._tools.pop(tool_id)
        self._done_tools.add(tool_id)
        return self._builder.tool_finished(
            tool_id, view.output, is_error=view.is_error, exit_code=view.exit_code
        )

    def _prose_item(
        self, item_id: str, raw: Any, kind: Literal["text", "thinking"], phase: str
    ) -> list[Event]:
        text = raw if isinstance(raw, str) else ""
        events: list[Event] = []
        if self._open_prose != item_id:
            events += self._builder.close_open_messages()
            self._open_prose = item_id
        seen = self._prose.get(item_id, "")
        if not text.startswith(seen):
            log.debug("codex.text_rewritten", item_id=item_id)
            return events
        self._prose[item_id] = text
        delta = text[len(seen) :]
        events += self._builder.text(delta) if kind == "text" else self._builder.thinking(delta)
        if kind == "text" and phase == "completed" and text:
            self._last_text = text
        return events

    # -- turn end ----------------------------------------------------------------------------

    def _turn_completed(self, message: dict[str, Any]) -> list[Event]:
        raw_usage = message.get("usage")
        totals = ThreadTotals.from_codex(raw_usage if isinstance(raw_usage, dict) else {})
        usage = totals.since(self._previous)
        self._totals, self._usage, self._state = totals, usage, "completed"
        self._resume_revision += 1
        events: list[Event] = []
        for tool_id in list(self._tools):  # a todo list "completes when the turn ends"
            events += self._finish_tool(tool_id)
        events += self._builder.close_open_messages()
        for held in self._held:
            events += self._builder.raw("warning", {"message": held}, runner=RUNNER)
        events += self._builder.usage(usage)
        events += self._builder.result(
            result=self._last_text or None,
            stop_reason=STOP_REASON,
            usage=usage,
            runner_session_id=self._thread_id,
        )
        return events

    def _turn_failed(self, message: dict[str, Any]) -> list[Event]:
        error = message.get("error")
        reported = error.get("message") if isinstance(error, dict) else None
        text = str(reported or (self._held[-1] if self._held else "") or "codex reported a failed turn")
        self._state, self._error = "failed", redact(text)
        events = self._builder.close_open_messages()
        events += self._builder.error(text, error_code(text))
        events += self._builder.result(
            result=text, is_error=True, stop_reason="error", runner_session_id=self._thread_id
        )
        return events

    def _top_level_error(self, text: str) -> list[Event]:
        if text.startswith(_RETRY_NOTICE):
            return self._builder.loading(text)
        self._held.append(clip(text, 4096))
        return []

    def _exit_error(self, exit_code: int | None, stderr: str) -> tuple[str, str]:
        """Message and code for a codex that exited without reporting the end of its turn."""
        if _LOST_THREAD in stderr and self._resumed:
            self._lost_thread = True
            self._resume_revision += 1
            return (
                f"codex could not resume thread {self._resumed}: its session files are gone; "
                "the next turn starts a new thread",
                "resume_failed",
            )
        if self._held:
            return self._held[-1], error_code(self._held[-1])
        detail = f": {stderr}" if stderr else ""
        return f"codex exited {_exit(exit_code)} before finishing its turn{detail}", "runner_failed"
