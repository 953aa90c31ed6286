"""The serve translator's no-parse skip: it only ever skips lines a full parse would ignore."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners.opencode.serve_translator import IGNORED, makes_nothing

SERVE = sorted(Path(__file__).resolve().parents[2].glob("golden/opencode/*/serve_*.in.jsonl"))


def _ignored_by_full_parse(message: dict[str, object]) -> bool:
    kind, props = message["type"], message.get("properties")
    assert isinstance(props, dict)
    if kind in IGNORED:
        return True
    if kind == "message.updated":
        info = props.get("info")
        return not (isinstance(info, dict) and info.get("role") == "user")
    if kind == "session.status":
        status = props.get("status")
        return isinstance(status, dict) and status.get("type") not in ("idle", "retry")
    return False


@pytest.mark.parametrize("case", SERVE, ids=lambda p: p.name)
def test_skipped_lines_are_lines_a_full_parse_ignores(case: Path) -> None:
    lines = [line for line in case.read_text().splitlines() if line.strip()]
    skipped = [line for line in lines if makes_nothing(line)]
    for line in skipped:
        assert _ignored_by_full_parse(json.loads(line)), line[:200]
    assert skipped, "the recorded stream's bookkeeping lines take the fast path"


def test_serve_hello_skips_most_bookkeeping() -> None:
    case = next(p for p in SERVE if p.name == "serve_hello.in.jsonl")
    lines = [line for line in case.read_text().splitlines() if line.strip()]
    assert sum(map(makes_nothing, lines)) / len(lines) > 0.4


@pytest.mark.parametrize(
    "line",
    [
        '{"id":"e","type":"message.updated","properties":{"info":{"id":"m","role":"user"}}}',
        '{"id":"e","type":"message.updated","properties":{"info":{"id":"m","role":"\\u0075ser"}}}',
        '{"id":"e","type":"session.status","properties":{"status":{"type":"idle"}}}',
        '{"id":"e","type":"session.status","properties":{"status":{"type":"retry","attempt":1}}}',
        '{"id":"e","type":"message.part.delta","properties":{"delta":"x"}}',
        '{"id": "e", "type": "session.updated", "properties": {}}',
        '{"id":"e","type":"session.updated","properties":{"info":',
        '{"id":"e\\"","type":"session.updated","properties":{}}',
        ' {"id":"e","type":"session.updated","properties":{}}',
    ],
)
def test_lines_that_might_matter_are_parsed(line: str) -> None:
    assert not makes_nothing(line)


@pytest.mark.parametrize(
    "line",
    [
        '{"id":"e","type":"session.updated","properties":{"info":{"role":"user"}}}',
        '{"id":"e","type":"message.updated","properties":{"info":{"id":"m","role":"assistant"}}}',
        '{"id":"e","type":"session.status","properties":{"status":{"type":"busy"}}}',
    ],
)
def test_bookkeeping_is_skipped(line: str) -> None:
    assert makes_nothing(line)
