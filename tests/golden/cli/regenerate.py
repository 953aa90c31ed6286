"""Rewrite `tests/golden/cli/turn.txt` (the text rendering of the recorded stream turn). Review the diff."""

from __future__ import annotations

from pathlib import Path

from orchestrator.cli.artifacts import TurnSummary
from orchestrator.cli.render import render_text
from orchestrator.stream import Usage, parse_jsonl

HERE = Path(__file__).parent
EVENTS = HERE.parent / "stream" / "turn.events.jsonl"
SUMMARY = TurnSummary(
    assistant="examples.claude",
    runner="claude",
    session_id="chat-1",
    turn_id="turn-1",
    status="completed",
    stop_reason="end_turn",
    usage=Usage(input_tokens=1200, cached_input_tokens=800, output_tokens=64, scope="turn"),
    cost_usd=0.0123,
    duration_ms=4321,
    files_changed=["hello.txt"],
)


def rendered() -> str:
    return render_text(parse_jsonl(EVENTS.read_text()), SUMMARY)


def main() -> None:
    (HERE / "turn.txt").write_text(rendered(), encoding="utf-8")


if __name__ == "__main__":
    main()
