"""`StepAssembler`: folds a step's `ModelDelta`s into the assistant message, usage and stop reason."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pydantic import JsonValue

from orchestrator.llm.deltas import (
    ModelDelta,
    StopDelta,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    UsageDelta,
)
from orchestrator.llm.messages import Block, ChatMessage, TextBlock, ThinkingBlock, ToolCallBlock
from orchestrator.stream import Usage


@dataclass
class _Call:
    id: str
    name: str
    args: list[str] = field(default_factory=list)


def parse_arguments(text: str) -> tuple[dict[str, JsonValue], str | None]:
    """Arguments JSON -> (object, None), or ({}, why it is not a JSON object)."""
    if not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except ValueError as exc:
        return {}, f"arguments are not valid JSON: {exc}"
    if not isinstance(value, dict):
        return {}, "arguments must be a JSON object"
    return value, None


class StepAssembler:
    """Collects one model step. Blocks keep the order the model produced them in."""

    def __init__(self) -> None:
        self._blocks: list[TextBlock | ThinkingBlock | _Call] = []
        self._calls: dict[int, _Call] = {}
        self.usage = Usage()
        self.stop: StopReason | None = None
        self.bad_arguments: dict[str, str] = {}
        """Call id -> why its arguments could not be parsed."""

    def feed(self, delta: ModelDelta) -> None:
        last = self._blocks[-1] if self._blocks else None
        if isinstance(delta, TextDelta):
            if isinstance(last, TextBlock):
                self._blocks[-1] = TextBlock(text=last.text + delta.text)
            else:
                self._blocks.append(TextBlock(text=delta.text))
        elif isinstance(delta, ThinkingDelta):
            if isinstance(last, ThinkingBlock) and not last.signature:
                self._blocks[-1] = ThinkingBlock(
                    thinking=last.thinking + delta.text, signature=delta.signature
                )
            else:
                self._blocks.append(ThinkingBlock(thinking=delta.text, signature=delta.signature))
        elif isinstance(delta, ToolCallStart):
            call = _Call(delta.id, delta.name)
            self._calls[delta.index] = call
            self._blocks.append(call)
        elif isinstance(delta, ToolCallArgs):
            if delta.index in self._calls:
                self._calls[delta.index].args.append(delta.fragment)
        elif isinstance(delta, UsageDelta):
            self.usage = delta.usage
        elif isinstance(delta, StopDelta):
            self.stop = delta.reason
        elif isinstance(delta, ToolCallEnd):
            pass  # the arguments are parsed once, in `message()`

    def message(self) -> ChatMessage:
        blocks: list[Block] = []
        for block in self._blocks:
            if isinstance(block, _Call):
                arguments, problem = parse_arguments("".join(block.args))
                if problem is not None:
                    self.bad_arguments[block.id] = problem
                blocks.append(ToolCallBlock(id=block.id, name=block.name, arguments=arguments))
            elif not (isinstance(block, TextBlock) and not block.text):
                blocks.append(block)
        return ChatMessage(role="assistant", content=tuple(blocks))
