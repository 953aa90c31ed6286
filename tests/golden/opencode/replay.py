"""Replay a recorded opencode transcript through the translator (goldens and their tests).

A case is `<version>/<scenario>.in.jsonl` (the CLI's raw stdout), `<scenario>.meta.json` (how
the turn was run and ended: drive, exit code, stderr tail, cancelled, resume state given) and
`<scenario>.out.jsonl` (the expected events, reviewed by hand).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.stream import CountingIds, Event, TurnBuilder, dump_event
from runners.base import TurnOutcome, TurnRequest
from runners.opencode import OpencodeAdapter

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Replay:
    events: list[Event]
    outcome: TurnOutcome
    resume_state: dict[str, str]


def turn_for(meta: dict[str, Any]) -> TurnRequest:
    """The request a recorded turn stands for (only drive, resume and options matter here)."""
    return TurnRequest(
        assistant_id="golden.opencode",
        owner="golden",
        session_id="chat-golden",
        turn_id="turn-golden",
        prompt="golden",
        lifecycle="oneshot" if meta["drive"] == "run" else "session",
        resume=meta.get("resume", {}),
    )


def replay_lines(lines: list[str], meta: dict[str, Any]) -> Replay:
    """Stream start, every line through the translator, close, stream end (fixed ids and clock)."""
    builder = TurnBuilder(CountingIds(), runner="opencode", clock=lambda: 0)
    translator = OpencodeAdapter().translator(builder, turn_for(meta))
    events = builder.stream_start("golden.opencode", session_id="chat-golden")
    for line in lines:
        events += translator.feed(line)
    events += translator.close(meta["exit_code"], meta.get("stderr_tail", ""), cancelled=meta["cancelled"])
    outcome = translator.outcome
    events += builder.stream_end(outcome.status, error=outcome.error)
    return Replay(events, outcome, translator.resume_state)


def replay_case(case: Path) -> Replay:
    """`case` is the `.in.jsonl` file."""
    meta = json.loads(case.with_name(case.name.replace(".in.jsonl", ".meta.json")).read_text())
    return replay_lines(case.read_text(encoding="utf-8").splitlines(), meta)


def dump(events: list[Event]) -> str:
    return "".join(json.dumps(dump_event(e), sort_keys=True) + "\n" for e in events)


def regenerate(version_dir: Path) -> list[Path]:
    """Rewrite every `.out.jsonl` under `version_dir` from its `.in.jsonl` (review the diff!)."""
    written = []
    for case in sorted(version_dir.glob("*.in.jsonl")):
        out = case.with_name(case.name.replace(".in.jsonl", ".out.jsonl"))
        out.write_text(dump(replay_case(case).events), encoding="utf-8")
        written.append(out)
    return written
