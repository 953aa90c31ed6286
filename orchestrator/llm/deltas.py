"""What a model stream yields: small frozen deltas, the same for every provider."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from orchestrator.stream import Usage

_FROZEN = ConfigDict(extra="forbid", frozen=True)

StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "other"]
"""Why the model stopped, normalised (`stop`/`end_turn` -> `end_turn`, `tool_calls` -> `tool_use`)."""


class TextDelta(BaseModel):
    model_config = _FROZEN
    text: str


class ThinkingDelta(BaseModel):
    """A piece of thinking text, or (Anthropic) the block's signature once it is known."""

    model_config = _FROZEN
    text: str = ""
    signature: str = ""


class ToolCallStart(BaseModel):
    model_config = _FROZEN
    index: int
    """Position of the call in this step's batch (0, 1, ...)."""
    id: str
    name: str


class ToolCallArgs(BaseModel):
    model_config = _FROZEN
    index: int
    fragment: str
    """The next piece of the arguments' JSON text."""


class ToolCallEnd(BaseModel):
    model_config = _FROZEN
    index: int


class UsageDelta(BaseModel):
    """The step's usage so far; a later one replaces an earlier one (not added)."""

    model_config = _FROZEN
    usage: Usage


class StopDelta(BaseModel):
    model_config = _FROZEN
    reason: StopReason
    raw: str = ""
    """The provider's own spelling."""


ModelDelta = TextDelta | ThinkingDelta | ToolCallStart | ToolCallArgs | ToolCallEnd | UsageDelta | StopDelta
