"""`cage run` renderers: the text form against a golden, GitHub annotations and step summary."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from orchestrator.cli.render import GithubRenderer, JsonlRenderer, step_summary_markdown
from orchestrator.stream import CountingIds, TurnBuilder, parse_jsonl
from tests.golden.cli import regenerate


def test_text_rendering_matches_the_golden() -> None:
    assert regenerate.rendered() == (regenerate.HERE / "turn.txt").read_text(), "run `make golden`"


def test_jsonl_renderer_writes_one_event_per_line() -> None:
    out = io.StringIO()
    events = parse_jsonl(regenerate.EVENTS.read_text())
    renderer = JsonlRenderer(out)
    for event in events:
        renderer.feed(event)
    assert parse_jsonl(out.getvalue()) == events


def test_github_renderer_annotates_errors_and_appends_the_step_summary(tmp_path: Path) -> None:
    raw, step = io.StringIO(), tmp_path / "summary.md"
    step.write_text("earlier step\n")
    renderer = GithubRenderer(Console(file=io.StringIO()), Console(file=io.StringIO()), raw, step)
    builder = TurnBuilder(CountingIds())
    for event in builder.error("model said 500\nretry later: 100%", "model_api_error"):
        renderer.feed(event)
    renderer.finish(regenerate.SUMMARY.model_copy(update={"status": "error", "error": "boom"}))
    assert "\n::error title=cage (model_api_error)::model said 500%0Aretry later: 100%25\n" in raw.getvalue()
    text = step.read_text()
    assert text.startswith("earlier step\n### cage run: examples.claude")
    assert "| status | error |" in text and "**Error:** boom" in text and "- `hello.txt`" in text


def _commands_in_effect(stdout: str) -> list[str]:
    """The lines GitHub's runner would take as workflow commands (`::stop-commands::` honoured)."""
    seen, token = [], None
    for line in stdout.splitlines():
        if token is not None:
            if line == f"::{token}::":
                token = None
            continue
        if line.startswith("::stop-commands::"):
            token = line.removeprefix("::stop-commands::")
        elif line.startswith("::"):
            seen.append(line)
    return seen


def test_agent_text_cannot_issue_workflow_commands() -> None:
    """L6: agent text on stdout that looks like `::add-mask::` or ends a pause stays text."""
    stdout = io.StringIO()
    renderer = GithubRenderer(Console(file=stdout), Console(file=io.StringIO()), stdout, None)
    builder = TurnBuilder(CountingIds())
    evil = "ok\n::add-mask::x\n::stop-commands::guess\n::error::forged\n::guess::\n::warning::forged\n"
    for event in [
        *builder.text(evil),
        *builder.error("real failure", "model_api_error"),
        *builder.text(evil),
    ]:
        renderer.feed(event)
    renderer.finish(regenerate.SUMMARY)
    assert "::add-mask::x" in stdout.getvalue()  # still shown to the reader
    assert _commands_in_effect(stdout.getvalue()) == ["::error title=cage (model_api_error)::real failure"]


def test_step_summary_lists_usage_and_cost() -> None:
    md = step_summary_markdown(regenerate.SUMMARY)
    assert "| tokens in / out | 1,200 / 64 |" in md and "| cost | $0.0123 |" in md
