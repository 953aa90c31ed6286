"""The builder's record of a message (id, type, content so far) and of its open window."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from orchestrator.stream.content import ContentType, ExecuteProps, ToolCallProps
from orchestrator.stream.trusted import trusted_copy

Clock = Callable[[], int]
"""Milliseconds from some fixed origin; only differences are used (durations)."""


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def settled(props: ExecuteProps) -> ExecuteProps:
    """Props of a tool whose input streamed as fragments, with the fragments parsed into `input`."""
    if props.input_delta is None:
        return props
    if props.input is None:
        try:
            return trusted_copy(props, input=json.loads(props.input_delta), input_delta=None)
        except json.JSONDecodeError:
            return props
    return trusted_copy(props, input_delta=None)


@dataclass
class Message:
    """A message the builder knows, open or not: its id, type and content so far."""

    message_id: str
    type: ContentType
    text: list[str] = field(default_factory=list)
    props: ExecuteProps | ToolCallProps | None = None

    def content(self) -> str | ExecuteProps | ToolCallProps:
        return "".join(self.text) if self.props is None else self.props


@dataclass
class Window:
    """The open start/end window of a message."""

    message: Message
    opened_ms: int
    chunks: int = 0
