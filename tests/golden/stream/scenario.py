"""The recorded turn behind the stream goldens: a realistic runner turn built with `TurnBuilder`.

stream_start, sandbox status, thinking, text, one Bash run (input streamed, then its result),
more text, usage, result/summary, stream_end, with deterministic ids and clocks.
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.stream import CountingIds, Event, SessionEmitter, TurnBuilder, Usage

SESSION_ID = "sess-golden"
TURN_ID = "turn-1"
START_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z


def ticking(start: int, step: int) -> Callable[[], int]:
    """A clock that moves `step` ms on each reading."""
    now = start - step

    def clock() -> int:
        nonlocal now
        now += step
        return now

    return clock


def build_turn() -> list[Event]:
    """The golden turn's events, stamped."""
    b = TurnBuilder(CountingIds(), runner="claude", clock=ticking(0, 5))
    raw: list[Event] = []
    raw += b.stream_start(
        "demo.coder", assistant_name="Coder", session_id="chat-1", metadata={"locale": "en"}
    )
    raw += b.sandbox_status("ready", "sandbox ready", sandbox_id="cage-demo-coder-chat-1")
    raw += b.loading("Waiting for AI response...")
    raw += b.thinking("The user wants the files")
    raw += b.thinking(" listed; run ls.")
    raw += b.text("Let me look ")
    raw += b.text("at the workspace.")
    raw += b.tool_started("toolu_01", "Bash", summary=None)
    raw += b.tool_input_delta("toolu_01", '{"command":')
    raw += b.tool_input_delta("toolu_01", ' "ls -a"}')
    raw += b.tool_updated("toolu_01", summary="ls -a")
    raw += b.close_open_messages()
    raw += b.usage(Usage(input_tokens=1200, cached_input_tokens=1000, output_tokens=40, reasoning_tokens=12))
    raw += b.tool_finished("toolu_01", ".\n..\nREADME.md\nsrc\n", exit_code=0)
    raw += b.text("The workspace holds `README.md` and `src/`.")
    raw += b.usage(Usage(input_tokens=1300, cached_input_tokens=1200, output_tokens=25))
    turn = Usage(
        input_tokens=2500,
        cached_input_tokens=2200,
        output_tokens=65,
        reasoning_tokens=12,
        cost_usd=0.0123,
        scope="turn",
    )
    raw += b.usage(turn)
    raw += b.result(
        result="The workspace holds `README.md` and `src/`.",
        num_turns=2,
        duration_ms=4200,
        stop_reason="end_turn",
        cost_usd=0.0123,
        usage=turn,
        runner_session_id="cli-session-9",
    )
    raw += b.stream_end("completed")
    emitter = SessionEmitter(SESSION_ID, clock=ticking(START_MS, 7))
    return emitter.stamp_all(raw, turn_id=TURN_ID)
