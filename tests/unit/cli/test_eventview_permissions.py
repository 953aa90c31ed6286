"""`cage session` / `cage logs` show permission requests, their decisions and agent questions."""

from __future__ import annotations

import io

from rich.console import Console

from orchestrator.cli.eventview import EventView


def _shown(*frames: dict[str, object]) -> str:
    out = io.StringIO()
    view = EventView(Console(file=out, width=200, color_system=None))
    for frame in frames:
        view.show(frame)
    return out.getvalue()


def test_permissions_and_questions_get_a_line() -> None:
    text = _shown(
        {
            "type": "event",
            "props": {"event": "permission/request", "tool": "bash", "reason": "rule 'ask bash' asks"},
        },
        {
            "type": "event",
            "props": {"event": "permission/resolved", "decision": "deny", "by": "timeout", "tool": "bash"},
        },
        {
            "type": "event",
            "props": {"event": "question", "text": "Which colour?", "options": ["red", "blue"]},
        },
    )
    assert text.splitlines() == [
        "permission asked: bash rule 'ask bash' asks",
        "permission denied (timeout): bash",
        "question: Which colour? [red / blue]",
    ]
