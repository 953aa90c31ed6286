"""What both opencode translators keep about a turn, and how a turn ends.

The session id (for the next turn), the summed usage of the turn's model calls, the last stop
reason, the final answer, the first error, and the rules of `close()`: cancelled beats error
beats a non-zero exit beats completed. Usage and the result summary are reported once, at the
end, as one `turn`-scope `token/usage` and one `result/summary`.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from orchestrator.redaction import redact
from orchestrator.stream import Event, StreamStatus, TurnBuilder, Usage
from runners.base import OutcomeOnClose, TurnOutcome
from runners.opencode.invocation import RESUME_KEY
from runners.opencode.parts import as_dict, error_details, is_abort, step_usage

_TURN_END_REASONS = frozenset({"stop", "length", "content-filter", "end_turn", "max_tokens"})


class TurnLedger(OutcomeOnClose):
    """Turn-level state shared by the `run` and the `serve` translator."""

    def __init__(self, builder: TurnBuilder, resume: dict[str, str]) -> None:
        self.builder = builder
        self.session_id: str | None = resume.get(RESUME_KEY) or None
        self.usage: Usage | None = None
        self.steps = 0
        self.stop_reason: str | None = None
        self.answer: list[str] = []
        self.error: str | None = None
        self.aborted = False
        self.finished = False
        self.seen_output = False
        self._resume: tuple[str | None, dict[str, str]] = (None, {})

    def resume_state(self) -> dict[str, str]:
        """The session to resume; the same dict while the session id stays (the bridge asks after
        every line)."""
        session, cached = self.session_id, self._resume
        if cached[0] is not session:
            cached = self._resume = (session, {RESUME_KEY: session} if session else {})
        return cached[1]

    def note_session(self, value: Any) -> None:
        if isinstance(value, str) and value.startswith("ses"):
            self.session_id = value

    def step_started(self) -> None:
        """A model call begins: the answer is the text of the turn's last model call."""
        self.answer = []

    def step_finished(self, part: dict[str, Any]) -> None:
        usage = step_usage(part)
        self.usage = usage if self.usage is None else self.usage + usage
        self.steps += 1
        reason = part.get("reason")
        if isinstance(reason, str):
            self.stop_reason = reason
            if reason in _TURN_END_REASONS:
                self.finished = True

    def fail(self, error: Any) -> list[Event]:
        """An error the CLI reported; an abort (our own cancel) is not shown as an error."""
        if is_abort(error):
            self.aborted = True
            return []
        message, code, details = error_details(error)
        if self.error is None:
            self.error = redact(message)
        return [*self.builder.loading_done(), *self.builder.error(message, code, details)]

    def driver_error(self, properties: Any) -> list[Event]:
        message = as_dict(properties).get("message")
        text = message if isinstance(message, str) and message else "the opencode serve driver failed"
        if self.error is None:
            self.error = redact(text)
        return self.builder.error(text, "runner_error")

    def close(self, exit_code: int | None, stderr_tail: str, *, cancelled: bool) -> list[Event]:
        status = self._status(exit_code, cancelled=cancelled)
        events = self.builder.close_open_messages(status)
        if status == "error" and self.error is None:
            self.error = self._exit_message(exit_code, stderr_tail)
            details: dict[str, JsonValue] = {"exit_code": exit_code}
            events += self.builder.error(self.error, "runner_exit", details)
        usage = self.usage.model_copy(update={"scope": "turn"}) if self.usage is not None else None
        if usage is not None:
            events += self.builder.usage(usage)
        events += self.builder.result(
            result="".join(self.answer) or None,
            is_error=status == "error",
            num_turns=self.steps or None,
            stop_reason=self.stop_reason,
            cost_usd=usage.cost_usd if usage is not None else None,
            usage=usage,
            runner_session_id=self.session_id,
        )
        self._outcome = TurnOutcome(
            status=status, error=self.error, stop_reason=self.stop_reason, usage=usage
        )
        return events

    def _status(self, exit_code: int | None, *, cancelled: bool) -> StreamStatus:
        """Cancelled beats a reported error beats a failed exit; an exit 0 with no output fails."""
        if cancelled or (self.aborted and self.error is None and not self.finished):
            return "cancelled"
        if self.error is not None or exit_code != 0 or not self.seen_output:
            return "error"
        return "completed"

    def _exit_message(self, exit_code: int | None, stderr_tail: str) -> str:
        what = "was killed" if exit_code is None else f"exited with code {exit_code}"
        if exit_code == 0:
            what = "ended without reporting anything"
        tail = redact(stderr_tail.strip())
        return f"opencode {what}" + (f": {tail}" if tail else "")


class LedgerTranslator:
    """What opencode's `run` and `serve` translators answer alike: from their `TurnLedger`."""

    _ledger: TurnLedger

    @property
    def outcome(self) -> TurnOutcome:
        return self._ledger.outcome

    @property
    def finished(self) -> bool:
        return self._ledger.finished

    @property
    def resume_state(self) -> dict[str, str]:
        return self._ledger.resume_state()
