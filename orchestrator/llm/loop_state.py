"""What a loop run produces (`LoopResult` with its trace) and the mutable state it carries."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from orchestrator.llm.messages import ChatMessage, ToolCallBlock
from orchestrator.stream import Usage

LoopStop = Literal["completed", "max_rounds", "tool_loop_terminated", "cancelled", "error"]
_FROZEN = ConfigDict(extra="forbid", frozen=True)


class ToolTrace(BaseModel):
    """One tool call as it ran; times are monotonic seconds."""

    model_config = _FROZEN
    call_id: str
    name: str
    arguments: dict[str, JsonValue]
    is_error: bool
    started: float
    ended: float
    metadata: dict[str, JsonValue] = {}


class StepTrace(BaseModel):
    """One round: the model call and the tool calls it asked for."""

    model_config = _FROZEN
    round: int
    text: str
    model_stop: str | None
    usage: Usage
    tools: tuple[ToolTrace, ...] = ()
    compacted: bool = False
    """The history was compacted just before this step's model call."""


class LoopResult(BaseModel):
    model_config = _FROZEN
    stop_reason: LoopStop
    messages: tuple[ChatMessage, ...]
    """The whole history after the run (what the next turn starts from)."""
    usage: Usage
    """The turn's usage (scope `turn`), compaction calls included."""
    rounds: int
    steps: tuple[StepTrace, ...]
    error: str | None = None

    @property
    def text(self) -> str:
        """The final answer: the text of the last assistant message."""
        for message in reversed(self.messages):
            if message.role == "assistant":
                return message.text
        return ""


def call_signature(call: ToolCallBlock) -> tuple[str, str]:
    """Name plus canonical arguments: two calls with the same signature do the same thing."""
    return call.name, json.dumps(call.arguments, sort_keys=True, separators=(",", ":"))


@dataclass
class LoopState:
    """The mutable part of one run; a checkpoint is a snapshot of it."""

    session_id: str
    turn_id: str
    messages: list[ChatMessage]
    rounds: int = 0
    usage: Usage = field(default_factory=lambda: Usage(scope="turn"))
    steps: list[StepTrace] = field(default_factory=list)
    previous_calls: set[tuple[str, str]] = field(default_factory=set)

    def add_usage(self, usage: Usage) -> None:
        self.usage = self.usage + usage.model_copy(update={"scope": "turn"})

    def result(self, stop: LoopStop, error: str | None = None) -> LoopResult:
        return LoopResult(
            stop_reason=stop,
            messages=tuple(self.messages),
            usage=self.usage,
            rounds=self.rounds,
            steps=tuple(self.steps),
            error=error,
        )
