"""`runner.options` of a codex assistant (sandbox.yao), validated."""

from __future__ import annotations

from typing import Literal

from runners.options import RunnerOptions

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
ReasoningSummary = Literal["auto", "concise", "detailed", "none"]


class CodexOptions(RunnerOptions):
    """What an assistant may tune for codex. Unknown keys are an error, not silently dropped."""

    model: str | None = None
    """Model slug sent to the API instead of the connector's model."""
    reasoning_effort: ReasoningEffort | None = None
    """`model_reasoning_effort`; by default derived from the connector's `thinking`."""
    reasoning_summary: ReasoningSummary | None = None
    """`model_reasoning_summary`: how much of its thinking the model reports (shown as `thinking`)."""
    web_search: Literal["disabled", "cached", "live"] | None = None
    """codex's hosted `web_search` tool; only providers that implement it can serve it."""
