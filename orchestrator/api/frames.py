"""The websocket session protocol around the stream events.

Client -> server frames are a closed union on `type`. Server -> client frames are either stream
protocol events (their `type` is `text`, `thinking`, `execute`, `event`, ...) or control frames of
this session, whose `type` starts with `session.` and which never enter the event log.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from orchestrator.api.limits import MAX_SEQ
from orchestrator.pipeline import Attachment, PermissionAnswer

_FROZEN = ConfigDict(frozen=True, extra="forbid")
ATTACHMENT_NAME = r"^[^/\\\x00]{1,255}$"


class AttachmentFrame(BaseModel):
    """A file for the workspace (`attachments/<name>`), its content base64-encoded."""

    model_config = _FROZEN
    name: str = Field(pattern=ATTACHMENT_NAME)
    content_base64: str
    media_type: str = "application/octet-stream"

    @field_validator("name")
    @classmethod
    def _plain_name(cls, v: str) -> str:
        if v in (".", ".."):
            raise ValueError("must be a file name, not . or ..")
        return v

    @field_validator("content_base64")
    @classmethod
    def _base64(cls, v: str) -> str:
        try:
            base64.b64decode(v, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError("not valid base64") from exc
        return v

    def attachment(self) -> Attachment:
        return Attachment(
            name=self.name, content=base64.b64decode(self.content_base64), media_type=self.media_type
        )


class UserMessageFrame(BaseModel):
    model_config = _FROZEN
    type: Literal["user_message"]
    text: str = Field(min_length=1)
    attachments: list[AttachmentFrame] = Field(default_factory=list, max_length=32)
    client_id: str | None = Field(default=None, max_length=128)
    """Echoed in `session.accepted`, so a client can match the answer to its message."""


class InterruptFrame(BaseModel):
    """Graceful: the runner stops its turn; the session and its sandbox stay."""

    model_config = _FROZEN
    type: Literal["interrupt"]


class CancelFrame(BaseModel):
    """Force: the turn is killed at once."""

    model_config = _FROZEN
    type: Literal["cancel"]


class PermissionResponseFrame(BaseModel):
    """Answer a `permission/request`: `allow_always` also allows the same call for the session."""

    model_config = _FROZEN
    type: Literal["permission_response"]
    request_id: str = Field(min_length=1, max_length=128)
    decision: PermissionAnswer
    message: str | None = Field(default=None, max_length=4000)
    """Words for the agent with a denial."""


class QuestionResponseFrame(BaseModel):
    """Answer a `question` event; the text goes back to the agent as the question's result."""

    model_config = _FROZEN
    type: Literal["question_response"]
    request_id: str = Field(min_length=1, max_length=128)
    answer: str = Field(max_length=20_000)


class ResumeFrame(BaseModel):
    """Replay every event with `seq > after_seq` from the log, then continue live."""

    model_config = _FROZEN
    type: Literal["resume"]
    after_seq: int = Field(ge=0, le=MAX_SEQ)


class PingFrame(BaseModel):
    model_config = _FROZEN
    type: Literal["ping"]


ClientFrame = Annotated[
    UserMessageFrame
    | InterruptFrame
    | CancelFrame
    | PermissionResponseFrame
    | QuestionResponseFrame
    | ResumeFrame
    | PingFrame,
    Field(discriminator="type"),
]
ClientFrameAdapter: TypeAdapter[ClientFrame] = TypeAdapter(ClientFrame)


class SessionReady(BaseModel):
    """First frame after the connection opens."""

    model_config = _FROZEN
    type: Literal["session.ready"] = "session.ready"
    session_id: str
    assistant_id: str
    last_seq: int
    """Seq of the last event in the log when the connection opened."""
    after_seq: int
    """Events after this seq follow (replayed from the log, then live)."""
    running_turn_id: str | None = None


class SessionAccepted(BaseModel):
    model_config = _FROZEN
    type: Literal["session.accepted"] = "session.accepted"
    turn_id: str
    client_id: str | None = None


class SessionInterrupting(BaseModel):
    model_config = _FROZEN
    type: Literal["session.interrupting"] = "session.interrupting"
    turn_id: str
    force: bool


class SessionAck(BaseModel):
    model_config = _FROZEN
    type: Literal["session.ack"] = "session.ack"
    of: str
    """The client frame type acknowledged (`permission_response`, `question_response`, `resume`)."""


class SessionPong(BaseModel):
    model_config = _FROZEN
    type: Literal["session.pong"] = "session.pong"


class SessionError(BaseModel):
    """A client frame was refused; the connection stays open unless `code` is an auth failure."""

    model_config = _FROZEN
    type: Literal["session.error"] = "session.error"
    code: str
    """`bad_frame`, `turn_running`, `no_turn`, `capacity`, `rate_limited`, `not_found`,
    `unauthorized`, `forbidden`, `invalid`, `unsupported`, `unavailable`, `failed`."""
    message: str
    fields: list[dict[str, str]] | None = None


ServerFrame = SessionReady | SessionAccepted | SessionInterrupting | SessionAck | SessionPong | SessionError
