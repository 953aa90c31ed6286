"""Stream protocol events as terminal output for `cage session` and `cage logs`.

Text and thinking deltas are printed as they arrive (thinking dimmed), a tool run gets one line
when it starts and one when it ends, sandbox status and the turn's end get a dim line. Unknown
event kinds from a newer server are skipped, never an error.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

Frame = dict[str, Any]


class EventView:
    """Renders one session's events; keeps only what it needs to end lines at the right place."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._inline: str | None = None  # the type of the text being printed without a newline
        self._tools: dict[str, str] = {}

    def _end_line(self) -> None:
        if self._inline is not None:
            self.console.print()
            self._inline = None

    def _line(self, text: str, style: str = "") -> None:
        self._end_line()
        self.console.print(Text(text, style=style))

    def show(self, frame: Frame) -> None:
        kind = frame.get("type")
        props: dict[str, Any] = frame.get("props") or {}
        if kind in ("text", "thinking") and frame.get("delta"):
            if self._inline not in (None, kind):
                self._end_line()
            self._inline = str(kind)
            style = "dim italic" if kind == "thinking" else ""
            self.console.print(Text(str(props.get("content", "")), style=style), end="")
        elif kind in ("text", "thinking"):
            self._line(str(props.get("content", "")), "dim italic" if kind == "thinking" else "")
        elif kind in ("execute", "agent", "todo", "plan", "job", "question"):
            self._tool(props)
        elif kind == "error":
            self._line(f"error: {props.get('message', '')} ({props.get('code', '')})", "bold red")
        elif kind == "event":
            self._lifecycle(props)
        elif kind == "session.error":
            self._line(f"refused: {frame.get('message', '')} ({frame.get('code', '')})", "red")
        elif kind == "session.interrupting":
            self._line("interrupting the turn (Ctrl-C again to quit)", "yellow")

    def _tool(self, props: dict[str, Any]) -> None:
        tool_id = str(props.get("tool_id", ""))
        if props.get("tool"):
            self._tools[tool_id] = str(props["tool"])
        status = props.get("status")
        name = self._tools.get(tool_id, "tool")
        if status == "running":
            self._line(f"⚙ {name} …", "cyan")
        elif status in ("completed", "error"):
            summary = str(props.get("summary") or "")[:200]
            mark, style = ("✓", "green") if status == "completed" else ("✗", "red")
            self._line(f"{mark} {name}{': ' + summary if summary else ''}", style)

    def _lifecycle(self, props: dict[str, Any]) -> None:
        event = props.get("event")
        if event == "sandbox/status":
            self._line(f"[sandbox {props.get('phase', '')}: {props.get('message', '')}]", "dim")
        elif event == "permission/request":
            self._line(f"permission asked: {props.get('tool', '')} {props.get('reason') or ''}", "yellow")
        elif event == "permission/resolved":
            verdict = "allowed" if props.get("decision") == "allow" else "denied"
            self._line(f"permission {verdict} ({props.get('by', '')}): {props.get('tool') or ''}", "yellow")
        elif event == "question":
            options = " / ".join(str(o) for o in props.get("options") or ())
            suffix = f" [{options}]" if options else ""
            self._line(f"question: {props.get('text', '')}{suffix}", "yellow")
        elif event == "stream_end":
            status = props.get("status")
            usage = props.get("usage") or {}
            tokens = ""
            if usage:
                tokens = f", {usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out"
            self._line(f"[{status}{tokens}]", "dim" if status == "completed" else "yellow")
        elif event == "turn/stalled":
            self._line("[the turn seems stalled]", "yellow")
