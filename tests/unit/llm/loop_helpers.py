"""Running an `AgentLoop` inside a validated event stream, for the engine tests."""

from __future__ import annotations

import time
from collections.abc import Sequence

import anyio

from orchestrator.llm import AgentLoop, ChatMessage, Checkpoint, LoopResult
from orchestrator.stream import CountingIds, Event, StreamStatus, TurnBuilder, validate_stream


class Recorder:
    """Collects events with the monotonic time they arrived."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.times: list[float] = []

    async def __call__(self, batch: Sequence[Event]) -> None:
        now = time.monotonic()
        self.events.extend(batch)
        self.times.extend(now for _ in batch)


def status_for(result: LoopResult) -> StreamStatus:
    return {"completed": "completed", "cancelled": "cancelled"}.get(result.stop_reason, "error")  # type: ignore[return-value]


async def drive(
    loop: AgentLoop,
    prompt: str | Sequence[ChatMessage] = "go",
    *,
    cancel: anyio.Event | None = None,
    resume: Checkpoint | None = None,
    turn_id: str = "turn-1",
) -> tuple[LoopResult, Recorder]:
    """One turn wrapped in stream_start/stream_end; asserts the stream is valid."""
    recorder = Recorder()
    builder = TurnBuilder(CountingIds(), runner="yaocode")
    await recorder(builder.stream_start("test.assistant"))
    if resume is not None:
        result = await loop.resume(resume, builder, cancel, emit=recorder)
    else:
        messages = [ChatMessage.user(prompt)] if isinstance(prompt, str) else list(prompt)
        result = await loop.run(
            messages, builder, cancel, emit=recorder, session_id="sess-1", turn_id=turn_id
        )
    await recorder(builder.stream_end(status_for(result), error=result.error, usage=result.usage))
    problems = validate_stream(recorder.events, stamped=False)
    assert problems == [], problems
    return result, recorder


def max_overlap(intervals: Sequence[tuple[float, float]]) -> int:
    """Most intervals open at the same instant."""
    points = sorted(
        [(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda p: (p[0], p[1])
    )
    best = current = 0
    for _, step in points:
        current += step
        best = max(best, current)
    return best
