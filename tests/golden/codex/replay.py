"""Replays a recorded `codex exec --json` transcript through `CodexTranslator` into protocol events.

A case is `<cli-version>/<scenario>.in.jsonl` (codex's raw stdout) with `<scenario>.meta.json`
(how the process ended: `exit_code`, `stderr_tail`, `cancelled`, and the `resume` state the turn
was started with) and the expected `<scenario>.out.jsonl`. Ids come from `CountingIds` and the
clock stands still, so the events are the same on every run.

Regenerate the `.out` files from the recorded input with `python -m tests.golden.codex.replay`
(re-record the input with `python -m tests.golden.codex.record`) and review the diff.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.stream import CountingIds, TurnBuilder, dump_event
from runners.base import TurnOutcome, TurnRequest
from runners.codex import CLI_VERSION, CodexAdapter

HERE = Path(__file__).parent
ASSISTANT_ID = "tests.codex"
TURN_ID = "t-1"


def cases(version: str = CLI_VERSION) -> list[Path]:
    """The recorded `.in.jsonl` files of one CLI version."""
    return sorted((HERE / version).glob("*.in.jsonl"))


def scenario_name(case: Path) -> str:
    return case.name.removesuffix(".in.jsonl")


def meta_path(case: Path) -> Path:
    return case.with_name(f"{scenario_name(case)}.meta.json")


def out_path(case: Path) -> Path:
    return case.with_name(f"{scenario_name(case)}.out.jsonl")


def golden_turn(scenario: str, resume: Mapping[str, str] | None = None) -> TurnRequest:
    """The turn a golden is replayed as (the translator needs its turn id and resume state)."""
    return TurnRequest(
        assistant_id=ASSISTANT_ID,
        owner="tests",
        session_id=f"golden-{scenario}",
        turn_id=TURN_ID,
        prompt="",
        resume=dict(resume or {}),
    )


def replay(case: Path) -> tuple[list[dict[str, Any]], TurnOutcome, dict[str, str]]:
    """Events (as JSON dicts, `stream_start` to `stream_end`), outcome and resume state of a case."""
    meta = json.loads(meta_path(case).read_text(encoding="utf-8"))
    scenario = scenario_name(case)
    builder = TurnBuilder(CountingIds(), runner="codex", clock=lambda: 0)
    translator = CodexAdapter().translator(builder, golden_turn(scenario, meta.get("resume")))
    events = builder.stream_start(ASSISTANT_ID, session_id=f"golden-{scenario}")
    with case.open(encoding="utf-8") as lines:
        for line in lines:
            events += translator.feed(line.rstrip("\n"))
    events += translator.close(meta["exit_code"], meta["stderr_tail"], cancelled=meta["cancelled"])
    outcome = translator.outcome
    events += builder.stream_end(outcome.status, error=outcome.error, usage=outcome.usage)
    return [dump_event(e) for e in events], outcome, translator.resume_state


def write_expected(case: Path) -> None:
    events, _, _ = replay(case)
    text = "".join(json.dumps(e, ensure_ascii=False, sort_keys=True) + "\n" for e in events)
    out_path(case).write_text(text, encoding="utf-8")


def main() -> None:
    for case in cases():
        write_expected(case)
        print(f"wrote {out_path(case).relative_to(HERE)}")


if __name__ == "__main__":
    main()
