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
    assert raw.getvalue() == "::error title=cage (model_api_error)::model said 500%0Aretry later: 100%25\n"
    text = step.read_text()
    assert text.startswith("earlier step\n### cage run: examples.claude")
    assert "| status | error |" in text and "**Error:** boom" in text and "- `hello.txt`" in text


def test_step_summary_lists_usage_and_cost() -> None:
    md = step_summary_markdown(regenerate.SUMMARY)
    assert "| tokens in / out | 1,200 / 64 |" in md and "| cost | $0.0123 |" in md
