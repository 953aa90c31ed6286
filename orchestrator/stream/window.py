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
    input_parts: list[str] = field(default_factory=list)
    """A running tool's input fragments not yet folded into `props.input_delta`: each fragment
    is appended here, and folded once when the props are read (not copied again per fragment)."""

    def tool_props(self) -> ExecuteProps:
        """The props of a tool message, every input fragment so far folded in."""
        props = self.props
        assert isinstance(props, ExecuteProps)
        if self.input_parts:
            fragments = "".join(self.input_parts)
            self.input_parts.clear()
            props = self.props = trusted_copy(props, input_delta=(props.input_delta or "") + fragments)
        return props

    def content(self) -> str | ExecuteProps | ToolCallProps:
        if self.props is None:
            return "".join(self.text)
        return self.tool_props() if isinstance(self.props, ExecuteProps) else self.props


@dataclass
class Window:
    """The open start/end window of a message."""

    message: Message
    opened_ms: int
    chunks: int = 0
