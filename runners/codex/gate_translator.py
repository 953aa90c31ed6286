"""The codex translator of a turn whose tool calls Cage decides (`TurnRequest.ask_permissions`).

The gate driver copies `codex exec --json` lines unchanged, so `CodexTranslator` reads them as
always; this wrapper adds what the driver prints itself and what the asking mode changes:

* `cage.gate.request` lines become `PermissionAsk`s (see `runners.codex.gate`), handed to the
  bridge by `take_requests`;
* the warning codex prints (twice) for `--dangerously-bypass-hook-trust`, which the asking mode
  needs so the generated hook runs without an interactive review, is dropped: it says nothing
  about the turn.

A refused call never runs and codex reports no item for it (its model gets the refusal as the
tool's output); the `permission/*` events the broker emits are what the client sees of it.
"""

from __future__ import annotations

from orchestrator.stream import Event, TurnBuilder
from runners.base import ControlQueue, ControlRequest, TurnOutcome, TurnRequest
from runners.codex.gate import REQUEST_TYPE, asks_for
from runners.codex.translator import CodexTranslator
from runners.lines import json_object

HOOK_TRUST_WARNING = "`--dangerously-bypass-hook-trust` is enabled."


class GateTranslator(ControlQueue):
    """`CodexTranslator` plus the control requests of the gate driver (a `ControlSource`)."""

    def __init__(self, builder: TurnBuilder, turn: TurnRequest) -> None:
        self._inner = CodexTranslator(builder, turn)
        self._requests: list[ControlRequest] = []

    @property
    def finished(self) -> bool:
        return self._inner.finished

    @property
    def outcome(self) -> TurnOutcome:
        return self._inner.outcome

    @property
    def resume_revision(self) -> int:
        return self._inner.resume_revision

    @property
    def resume_state(self) -> dict[str, str]:
        return self._inner.resume_state

    def feed(self, line: str) -> list[Event]:
        if REQUEST_TYPE in line or HOOK_TRUST_WARNING in line:
            message = json_object(line, runner="codex")
            if message is not None and message.get("type") == REQUEST_TYPE:
                self._requests.extend(asks_for(message))
                return []
            item = message.get("item") if message is not None else None
            if (
                isinstance(item, dict)
                and item.get("type") == "error"
                and str(item.get("message") or "").startswith(HOOK_TRUST_WARNING)
            ):
                return []
        return self._inner.feed(line)

    def close(self, exit_code: int | None, stderr_tail: str, *, cancelled: bool = False) -> list[Event]:
        return self._inner.close(exit_code, stderr_tail, cancelled=cancelled)
