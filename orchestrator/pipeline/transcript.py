"""`CallTranscript`: what one call said and which tools it ran, read off its own events as they pass."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.stream import Event, ExecuteProps, LifecycleEvent, MessageEnd
from orchestrator.stream.content import EXECUTE_TYPES


class CallTranscript:
    """Watches the events of one thread (None: the turn's root) and keeps its answer and tool results."""

    def __init__(self, thread_id: str | None) -> None:
        self.thread_id = thread_id
        self.texts: list[str] = []
        self.tools: list[dict[str, Any]] = []
        self.answer: str | None = None
        """Set when the call's answer is not its own text (an LLM fallback assistant's)."""

    def observe(self, events: Sequence[Event]) -> None:
        for event in events:
            if event.thread_id != self.thread_id or not isinstance(event, LifecycleEvent):
                continue
            props = event.props
            if not isinstance(props, MessageEnd):
                continue
            if props.type == "text" and isinstance(props.content, str):
                self.texts.append(props.content)
            elif props.type in EXECUTE_TYPES and isinstance(props.content, ExecuteProps):
                tool = props.content
                if tool.status in ("completed", "error"):
                    self.tools.append(
                        {
                            "tool_id": tool.tool_id,
                            "tool": tool.tool,
                            "input": tool.input,
                            "output": tool.output,
                            "is_error": bool(tool.is_error),
                        }
                    )

    @property
    def content(self) -> str:
        """The call's answer: its text messages, in order (or the fallback's `answer`)."""
        return "".join(self.texts) if self.answer is None else self.answer
