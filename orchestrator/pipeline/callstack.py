"""The call stack of one turn: the root call and the nested ones (delegation, agent-to-agent)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from orchestrator.errors import CallDepthError

MAX_CALL_DEPTH = 8
"""Nested calls allowed under the root; a delegation cycle stops here with the chain in the error."""

CallKind = Literal["root", "delegate", "fork"]


@dataclass(frozen=True)
class CallStack:
    """Which assistants are on the stack, outermost first, and how the innermost call was entered."""

    chain: tuple[str, ...]
    kind: CallKind = "root"
    limit: int = MAX_CALL_DEPTH

    @classmethod
    def root(cls, assistant_id: str, *, limit: int = MAX_CALL_DEPTH) -> CallStack:
        return cls((assistant_id,), "root", limit)

    @property
    def depth(self) -> int:
        """0 for the root call."""
        return len(self.chain) - 1

    @property
    def assistant_id(self) -> str:
        return self.chain[-1]

    @property
    def forked(self) -> bool:
        """Agent-to-agent calls are forked: they skip history and leave the parent's buffer alone."""
        return self.kind == "fork"

    def child(self, assistant_id: str, kind: Literal["delegate", "fork"]) -> CallStack:
        """The stack of a nested call.

        Raises:
            CallDepthError: the nesting would pass the limit (the message shows the chain).
        """
        chain = (*self.chain, assistant_id)
        if len(chain) - 1 > self.limit:
            raise CallDepthError(chain, self.limit)
        return CallStack(chain, kind, self.limit)
