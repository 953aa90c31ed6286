"""Claude Code's `result` counters -> Cage's one `Usage` shape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.stream import Usage


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def turn_usage(result: Mapping[str, Any]) -> Usage:
    """The turn's usage from a `result` line.

    Anthropic counts `input_tokens` without the cache: reads and writes of the prompt cache come
    on top, so Cage's `input_tokens` is their sum and `cached_input_tokens` the cached part.
    Claude Code does not report thinking tokens apart from output tokens.
    """
    raw = result.get("usage")
    counters: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    cached = _count(counters.get("cache_read_input_tokens")) + _count(
        counters.get("cache_creation_input_tokens")
    )
    cost = result.get("total_cost_usd")
    return Usage(
        input_tokens=_count(counters.get("input_tokens")) + cached,
        cached_input_tokens=cached,
        output_tokens=_count(counters.get("output_tokens")),
        cost_usd=float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
        scope="turn",
    )
