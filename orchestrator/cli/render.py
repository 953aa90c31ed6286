"""How `cage run` shows a turn: JSONL for machines, rich text for people, GitHub workflow commands.

Every renderer takes stamped events one at a time (`feed`) and a final `TurnSummary` (`finish`).
They only write to the streams they are given, so the text form is checked against a golden.
"""

from __future__ import annotations

import io
import json
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from orchestrator.cli.artifacts import TurnSummary
from orchestrator.stream import (
    ErrorEvent,
    Event,
    ExecuteEvent,
    JSONLEncoder,
    LifecycleEvent,
    SandboxStatus,
    TextEvent,
    ThinkingEvent,
)

_STATUS_MARK = {"completed": ("✓", "green"), "error": ("✗", "red"), "running": ("…", "yellow")}


class Renderer(Protocol):
    def feed(self, event: Event) -> None: ...

    def finish(self, summary: TurnSummary) -> None: ...


class JsonlRenderer:
    """Protocol events, one JSON object per line on stdout, nothing else."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.encoder = JSONLEncoder()

    def feed(self, event: Event) -> None:
        self.out.write(self.encoder.encode(event))
        self.out.flush()

    def finish(self, summary: TurnSummary) -> None:
        return None


class TextRenderer:
    """Streaming text, one line per tool run with its status, dimmed thinking, a final table.

    Sandbox and image-build progress goes to `err` so stdout stays the agent's answer.
    """

    def __init__(self, out: Console, err: Console) -> None:
        self.out = out
        self.err = err
        self._mode: str | None = None
        self._tools: dict[str, tuple[str, str]] = {}

    def _switch(self, mode: str) -> None:
        if self._mode is not None and self._mode != mode and self._mode in ("text", "thinking"):
            self.out.print()
        self._mode = mode

    def feed(self, event: Event) -> None:
        if isinstance(event, TextEvent):
            self._switch("text")
            self.out.print(event.props.content, end="", markup=False, highlight=False)
        elif isinstance(event, ThinkingEvent):
            self._switch("thinking")
            self.out.print(Text(event.props.content, style="dim italic"), end="")
        elif isinstance(event, ExecuteEvent):
            self._tool(event)
        elif isinstance(event, ErrorEvent):
            self._switch("error")
            self.out.print(Text(f"error: {event.props.message}", style="bold red"))
        elif isinstance(event, LifecycleEvent) and isinstance(event.props, SandboxStatus):
            message = f" {event.props.message}" if event.props.message else ""
            self.err.print(Text(f"[sandbox] {event.props.phase}{message}", style="dim"), highlight=False)

    def _tool(self, event: ExecuteEvent) -> None:
        props = event.props
        name, summary = self._tools.get(props.tool_id, ("tool", ""))
        name = props.tool or name
        summary = props.summary or summary
        self._tools[props.tool_id] = (name, summary)
        if props.status not in ("completed", "error"):
            return
        self._switch("tool")
        mark, style = _STATUS_MARK["error" if props.is_error or props.status == "error" else "completed"]
        line = Text(f"{mark} ", style=style)
        line.append(name, style="bold")
        if summary:
            line.append(f"  {summary}")
        if props.exit_code not in (None, 0):
            line.append(f"  (exit {props.exit_code})", style=style)
        self.out.print(line, highlight=False)

    def finish(self, summary: TurnSummary) -> None:
        self._switch("summary")
        table = Table(show_header=False, box=None, padding=(0, 2))
        table.add_row(
            "status", Text(summary.status, style="green" if summary.status == "completed" else "red")
        )
        if summary.stop_reason:
            table.add_row("stop reason", summary.stop_reason)
        usage = summary.usage
        if usage is not None:
            table.add_row("tokens in / out", f"{usage.input_tokens:,} / {usage.output_tokens:,}")
            if usage.cached_input_tokens:
                table.add_row("cached input", f"{usage.cached_input_tokens:,}")
        table.add_row("cost", f"${summary.cost_usd:.4f}" if summary.cost_usd is not None else "unknown")
        table.add_row("duration", f"{summary.duration_ms / 1000:.1f}s")
        if summary.files_changed:
            table.add_row("files changed", ", ".join(summary.files_changed[:10]))
        self.out.print()
        self.out.print(table)


class GithubRenderer(TextRenderer):
    """Text output plus `::error` annotations and a Markdown step summary (`$GITHUB_STEP_SUMMARY`).

    The agent's text reaches stdout, where a line starting with `::` is a workflow command
    (`::add-mask::`, `::error::`, `::stop-commands::`). So command processing is switched off with
    `::stop-commands::<token>` before the first event and on again (`::<token>::`) only around
    Cage's own annotations; the token is random per run, so agent text cannot end the pause.
    """

    def __init__(self, out: Console, err: Console, raw: TextIO, step_summary: Path | None) -> None:
        super().__init__(out, err)
        self.raw = raw
        self.step_summary = step_summary
        self._token = ""
        self._pause()

    def _pause(self) -> None:
        self._token = secrets.token_hex(16)
        self.raw.write(f"::stop-commands::{self._token}\n")
        self.raw.flush()

    def _command(self, line: str) -> None:
        """One workflow command of Cage's own, between two pauses."""
        self.out.file.flush()
        self.raw.write(f"\n::{self._token}::\n{line}\n")
        self._pause()

    def feed(self, event: Event) -> None:
        super().feed(event)
        if isinstance(event, ErrorEvent):
            self._command(f"::error title=cage ({_escape(event.props.code)})::{_escape(event.props.message)}")

    def finish(self, summary: TurnSummary) -> None:
        super().finish(summary)
        self.out.file.flush()
        self.raw.write(f"\n::{self._token}::\n")
        self.raw.flush()
        if self.step_summary is not None:
            with self.step_summary.open("a", encoding="utf-8") as fh:
                fh.write(step_summary_markdown(summary))


def _escape(message: str) -> str:
    """GitHub workflow-command escaping for a message."""
    return message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def step_summary_markdown(summary: TurnSummary) -> str:
    usage = summary.usage
    rows = [
        ("assistant", summary.assistant),
        ("runner", summary.runner or "-"),
        ("status", summary.status),
        ("stop reason", summary.stop_reason or "-"),
        ("tokens in / out", f"{usage.input_tokens:,} / {usage.output_tokens:,}" if usage else "-"),
        ("cost", f"${summary.cost_usd:.4f}" if summary.cost_usd is not None else "unknown"),
        ("duration", f"{summary.duration_ms / 1000:.1f}s"),
        ("files changed", str(len(summary.files_changed))),
    ]
    lines = [f"### cage run: {summary.assistant}", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    if summary.error:
        lines += ["", f"**Error:** {summary.error}"]
    if summary.files_changed:
        lines += ["", "<details><summary>files changed</summary>", ""]
        lines += [f"- `{name}`" for name in summary.files_changed]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n\n"


def render_text(events: Sequence[Event], summary: TurnSummary, *, width: int = 100) -> str:
    """The text form of a recorded turn, without colours (for goldens and `--output text` to files)."""
    out = Console(record=True, width=width, no_color=True, force_terminal=False, file=io.StringIO())
    err = Console(file=io.StringIO())
    renderer = TextRenderer(out, err)
    for event in events:
        renderer.feed(event)
    renderer.finish(summary)
    return out.export_text()


def dumps(summary: TurnSummary) -> str:
    return json.dumps(summary.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
