"""`OpencodeAdapter`: the opencode runner (opencode 1.18.33) behind the runner contract."""

from __future__ import annotations

import signal

from orchestrator.stream import TurnBuilder
from runners.base import CancelPolicy, RunnerExec, Supports, Translator, TurnRequest
from runners.opencode.config import mcp_keys
from runners.opencode.invocation import build_opencode_exec, drive_for
from runners.opencode.options import OpencodeOptions
from runners.opencode.run_translator import RunTranslator
from runners.opencode.serve_translator import ServeTranslator


class OpencodeAdapter:
    """Pure adapter: `opencode run` for oneshot boxes, a resident `opencode serve` for the others.

    Asking (`TurnRequest.ask_permissions`): always the serve drive, the config makes every tool
    ask, and the serve translator surfaces `permission.asked` / `question.asked` to the bridge.

    Cancel: SIGINT to the exec's process group in both drives. `opencode run` just dies on it
    (nothing more is printed); the serve driver posts `/session/<id>/abort`, prints the events
    that follow for up to 5 s and exits 130, while the server (in its own session) keeps running.
    """

    name = "opencode"
    image = "opencode"
    supports = Supports(
        resume=True, thinking=True, text_deltas=True, usage=True, cost=True, mcp=True, images=True
    )
    cancel = CancelPolicy(signal=int(signal.SIGINT), grace_seconds=10.0)

    def build_exec(self, turn: TurnRequest) -> RunnerExec:
        """Raises:
        RunnerError: an empty prompt, no connector or no model.
        ConfigError: bad `runner.options` (the key path named).
        """
        return build_opencode_exec(turn)

    def translator(self, builder: TurnBuilder, turn: TurnRequest) -> Translator:
        options = OpencodeOptions.parse(turn.options)
        if drive_for(turn, options) == "serve":
            return ServeTranslator(
                builder,
                dict(turn.resume),
                asking=turn.ask_permissions,
                mcp_servers=mcp_keys(turn),
                workdir=turn.workdir,
            )
        return RunTranslator(builder, dict(turn.resume))
