"""`runner.options` of a codex assistant (sandbox.yao), validated."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from orchestrator.errors import RunnerError

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
ReasoningSummary = Literal["auto", "concise", "detailed", "none"]


class CodexOptions(BaseModel):
    """What an assistant may tune for codex. Unknown keys are an error, not silently dropped."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    model: str | None = None
    """Model slug sent to the API instead of the connector's model."""
    reasoning_effort: ReasoningEffort | None = None
    """`model_reasoning_effort`; by default derived from the connector's `thinking`."""
    reasoning_summary: ReasoningSummary | None = None
    """`model_reasoning_summary`: how much of its thinking the model reports (shown as `thinking`)."""
    web_search: Literal["disabled", "cached", "live"] | None = None
    """codex's hosted `web_search` tool; only providers that implement it can serve it."""

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> CodexOptions:
        """Validate `runner.options`.

        Raises:
            RunnerError: an unknown key or a bad value, named by its key path.
        """
        try:
            return cls.model_validate(dict(raw))
        except ValidationError as exc:
            problems = "; ".join(
                f"runner.options.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
            )
            raise RunnerError("codex", problems) from exc
