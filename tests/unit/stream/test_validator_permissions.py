"""Stream validator rule 7: permission requests and questions are resolved exactly once."""

from __future__ import annotations

from orchestrator.stream import CountingIds, Event, TurnBuilder, validate_stream


def _turn(*build: str) -> list[str]:
    b = TurnBuilder(CountingIds(), clock=lambda: 0)
    events: list[Event] = list(b.stream_start("a"))
    steps = {
        "ask": lambda: b.permission_request(
            "p1", "bash", input={"command": "ls"}, deadline="2026-01-01T00:00:00Z"
        ),
        "allow": lambda: b.permission_resolved("p1", "allow", by="user"),
        "timeout": lambda: b.permission_resolved("p1", "deny", by="timeout"),
        "policy": lambda: b.permission_resolved("p9", "deny", by="policy", tool="write"),
        "stray": lambda: b.permission_resolved("p7", "allow", by="user"),
        "question": lambda: b.question("q1", "Which?", options=("a", "b")),
        "answer": lambda: b.question_answered("q1", "a"),
    }
    for step in build:
        events.extend(steps[step]())
    events.extend(b.stream_end("completed"))
    return validate_stream(events, stamped=False)


def test_asked_and_answered_is_valid() -> None:
    assert _turn("ask", "allow", "question", "answer", "policy") == []
    assert _turn("ask", "timeout") == []


def test_a_request_never_resolved() -> None:
    [problem] = _turn("ask")
    assert "permission request 'p1' is never resolved" in problem
    [problem] = _turn("question")
    assert "question request 'q1' is never resolved" in problem


def test_resolved_twice_or_never_asked() -> None:
    assert any("resolved twice" in p for p in _turn("ask", "allow", "timeout"))
    assert any("'p7' was never asked" in p for p in _turn("stray"))
    assert any("used twice" in p for p in _turn("ask", "allow", "ask", "allow"))
