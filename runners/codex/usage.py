"""codex reports token usage **cumulated over the whole thread** (a resumed thread goes on
counting from the previous turns); Cage reports usage per turn. `ThreadTotals` holds codex's
running totals, kept between turns in `resume_state`, and turns two of them into one turn's usage.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from orchestrator.stream import Usage

_PREFIX = "usage_"


def _count(raw: Mapping[str, Any], name: str) -> int:
    value = raw.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


@dataclass(frozen=True)
class ThreadTotals:
    """codex's cumulative counters for one thread."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    @classmethod
    def from_codex(cls, usage: Mapping[str, Any]) -> ThreadTotals:
        """From `turn.completed.usage`; cache writes count as cached input, like the `Usage` model says."""
        return cls(
            input_tokens=_count(usage, "input_tokens"),
            cached_input_tokens=(
                _count(usage, "cached_input_tokens") + _count(usage, "cache_write_input_tokens")
            ),
            output_tokens=_count(usage, "output_tokens"),
            reasoning_tokens=_count(usage, "reasoning_output_tokens"),
        )

    @classmethod
    def from_resume(cls, resume: Mapping[str, str]) -> ThreadTotals:
        """From a previous turn's `resume_state`; missing or garbled numbers count as 0."""
        values: dict[str, int] = {}
        for f in fields(cls):
            raw = resume.get(_PREFIX + f.name, "0")
            values[f.name] = int(raw) if raw.isdigit() else 0
        return cls(**values)

    def to_resume(self) -> dict[str, str]:
        return {_PREFIX + name: str(getattr(self, name)) for name in _NAMES}

    def since(self, before: ThreadTotals) -> Usage:
        """This turn's usage: these totals minus the ones after the previous turn.

        A counter that went down means codex started counting again (a new thread, or its
        history was rewritten): the totals are then this turn's own.
        """
        names = [f.name for f in fields(self)]
        mine = [getattr(self, n) for n in names]
        base = [getattr(before, n) for n in names]
        if any(m < b for m, b in zip(mine, base, strict=True)):
            base = [0] * len(names)
        diff = [m - b for m, b in zip(mine, base, strict=True)]
        return Usage(
            input_tokens=diff[0],
            cached_input_tokens=diff[1],
            output_tokens=diff[2],
            reasoning_tokens=diff[3],
            scope="turn",
        )


_NAMES = tuple(f.name for f in fields(ThreadTotals))
