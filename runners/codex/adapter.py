"""`CodexAdapter`: the codex runner (Codex CLI 0.171.0 in the `codex` runner image)."""

from __future__ import annotations

import signal

from orchestrator.stream import TurnBuilder
from runners.base import CancelPolicy, RunnerExec, Supports, Translator, TurnRequest
from runners.codex.gate_translator import GateTranslator
from runners.codex.invocation import build_codex_exec
from runners.codex.translator import CodexTranslator

CLI_VERSION = "0.171.0"


class CodexAdapter:
    """Drives `codex exec --json` (and `codex exec resume`) for one turn at a time.

    Cancel: SIGINT to the process group; codex stops and exits 1 without a final event, and the
    translator reports `cancelled`. SIGKILL after the grace period.

    Asking (`TurnRequest.ask_permissions`): codex's `PreToolUse` hook holds each tool call and
    the gate driver around `codex exec` hands it to Cage (`GateTranslator` surfaces it).
    """

    name = "codex"
    image = "codex"
    supports = Supports(
        resume=True, thinking=True, text_deltas=False, usage=True, cost=False, mcp=True, images=True
    )
    cancel = CancelPolicy(signal=int(signal.SIGINT), grace_seconds=5.0)

    def build_exec(self, turn: TurnRequest) -> RunnerExec:
        """The exec for one turn (see `runners.codex.invocation`).

        Raises:
            RunnerError: the connector is not an openai-type one, an MCP server codex cannot
                use, or an empty prompt.
            ConfigError: bad `runner.options` (the key path named).
        """
        return build_codex_exec(turn)

    def translator(self, builder: TurnBuilder, turn: TurnRequest) -> Translator:
        if turn.ask_permissions:
            return GateTranslator(builder, turn)
        return CodexTranslator(builder, turn)
