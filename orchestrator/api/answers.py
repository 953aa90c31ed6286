"""Bodies of the HTTP answer routes: a `permission/request` or a `question` answered without a
websocket (SSE and OpenAI-compatible clients, operators through the admin API)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.pipeline import PermissionAnswer

_FROZEN = ConfigDict(frozen=True, extra="forbid")
REQUEST_ID = r"^[A-Za-z0-9._:-]{1,128}$"


class PermissionAnswerBody(BaseModel):
    """`POST /v1/sessions/{id}/permissions/{request_id}`."""

    model_config = _FROZEN
    decision: PermissionAnswer
    """`allow_always` also allows the same call (tool and argument) for the rest of the session."""
    message: str | None = Field(default=None, max_length=4000)
    """Words for the agent with a denial."""


class QuestionAnswerBody(BaseModel):
    """`POST /v1/sessions/{id}/questions/{request_id}`."""

    model_config = _FROZEN
    answer: str = Field(max_length=20_000)


class Answered(BaseModel):
    model_config = _FROZEN
    request_id: str
    status: Literal["answered"] = "answered"
