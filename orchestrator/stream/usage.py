"""Token and cost accounting shared by every runner: one `Usage` model, summed with `+`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from orchestrator.attribute_docs import describe_fields
from orchestrator.stream.trusted import trusted

UsageScope = Literal["step", "turn", "cumulative"]


class Usage(BaseModel):
    """Tokens and cost of one model call (`step`), one turn, or a whole session (`cumulative`).

    Every runner maps its own counters onto these fields; `cached_input_tokens` and
    `reasoning_tokens` are parts of `input_tokens` and `output_tokens`, not extra to them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=describe_fields)

    input_tokens: int = 0
    """Prompt tokens, cached ones included."""
    cached_input_tokens: int = 0
    """The part of `input_tokens` served from a prompt cache (reads and writes)."""
    output_tokens: int = 0
    """Completion tokens, reasoning ones included."""
    reasoning_tokens: int = 0
    """The part of `output_tokens` spent on thinking."""
    cost_usd: float | None = None
    """Cost in US dollars; None when the runner does not report it."""
    scope: UsageScope = "step"
    """What the numbers cover: one model call, one turn, or the session so far."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        """Sum two usages. The cost stays None only when both are unknown; the wider scope wins."""
        if not isinstance(other, Usage):
            return NotImplemented
        if self.cost_usd is None and other.cost_usd is None:
            cost: float | None = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return trusted(  # sums of two valid usages: valid
            Usage,
            input_tokens=self.input_tokens + other.input_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cost_usd=cost,
            scope=_wider(self.scope, other.scope),
        )


_SCOPE_RANK: dict[UsageScope, int] = {"step": 0, "turn": 1, "cumulative": 2}


def _wider(a: UsageScope, b: UsageScope) -> UsageScope:
    return a if _SCOPE_RANK[a] >= _SCOPE_RANK[b] else b
