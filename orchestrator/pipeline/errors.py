"""Errors the pipeline raises on purpose; all under `orchestrator.errors.CageError`.

CageError
├── CallDepthError   chain, limit           (delegation / agent-to-agent nesting too deep: a cycle)
└── HookError        assistant_id, hook     (a user hook raised or returned something unusable)
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.errors import CageError


class CallDepthError(CageError):
    """Entering one more nested call would pass the depth limit; names the whole chain."""

    code = "call_depth_exceeded"

    def __init__(self, chain: Sequence[str], limit: int) -> None:
        self.chain = tuple(chain)
        self.limit = limit
        super().__init__(
            f"call depth limit {limit} reached (a delegation or agent call cycle?): " + " → ".join(chain)
        )


class HookError(CageError):
    """A hook in an assistant's `src/index.py` failed; the message names assistant, hook and cause."""

    code = "hook_error"

    def __init__(self, assistant_id: str, hook: str, message: str) -> None:
        self.assistant_id = assistant_id
        self.hook = hook
        super().__init__(f"assistant {assistant_id}: hook {hook}: {message}")
