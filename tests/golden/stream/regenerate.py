"""Rewrite the stream goldens: `python -m tests.golden.stream.regenerate`, then review the diff.

`turn.events.jsonl` is the recorded turn (from `scenario.build_turn`); each encoder's output on
it is stored beside it: `turn.sse`, `turn.jsonl`, `turn.ws` (one frame per line),
`turn.openai.sse` (with usage) and `turn.openai.json` (the non-streaming aggregate).
"""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.stream import (
    Event,
    JSONLEncoder,
    OpenAIChunkEncoder,
    SSEEncoder,
    WebSocketEncoder,
    aggregate_completion,
    encode_all,
    parse_jsonl,
)
from tests.golden.stream.scenario import build_turn

HERE = Path(__file__).parent
EVENTS = HERE / "turn.events.jsonl"
MODEL = "cage-demo"


def render_outputs(events: list[Event]) -> dict[str, str]:
    """Every golden output file's expected text, by file name."""
    completion = aggregate_completion(events, model=MODEL).model_dump(mode="json", exclude_none=True)
    return {
        "turn.sse": encode_all(SSEEncoder(), events),
        "turn.jsonl": encode_all(JSONLEncoder(), events),
        "turn.ws": "".join(WebSocketEncoder().encode(e) + "\n" for e in events),
        "turn.openai.sse": encode_all(OpenAIChunkEncoder(model=MODEL, include_usage=True), events),
        "turn.openai.json": json.dumps(completion, indent=2) + "\n",
    }


def main() -> None:
    EVENTS.write_text(encode_all(JSONLEncoder(), build_turn()), encoding="utf-8")
    recorded = parse_jsonl(EVENTS.read_text(encoding="utf-8"))
    for name, text in render_outputs(recorded).items():
        (HERE / name).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
