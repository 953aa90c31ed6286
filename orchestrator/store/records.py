"""What the store hands out and takes in: frozen pydantic records, never ORM rows."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from orchestrator.attribute_docs import describe_fields
from orchestrator.stream import Event, StreamStatus, Usage

MessageRole = Literal["system", "user", "assistant", "tool"]
MemorySpace = Literal["user", "team", "chat", "context"]
"""Yao's four memory namespaces: per user, per team, per session, and per request (`context`)."""
KeyRole = Literal["admin", "user"]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=describe_fields)


class SessionRecord(_Record):
    """A session: its event log, turns and messages hang off its id."""

    id: str
    """Internal: what events, turns and messages are keyed by; clients never need it."""
    owner: str
    client_id: str
    """The id its owner chose (or the server chose for them) and sees; unique per owner."""
    parent_id: str | None = None
    """The internal id of the parent session, for a sub-agent's child session."""
    assistant_id: str
    title: str
    created_at: datetime
    updated_at: datetime
    last_seq: int
    """Seq of the last event in the session's log; 0 when the log is empty."""
    metadata: dict[str, JsonValue]
    resume: dict[str, JsonValue]
    """Runner name -> the state that runner needs to resume the conversation."""


class NewMessage(_Record):
    """A message to persist; the store assigns its session, turn, time and sequence."""

    id: str
    role: MessageRole
    content: JsonValue
    """A string, or the list of content parts."""
    assistant_id: str | None = None


class MessageRecord(_Record):
    id: str
    session_id: str
    turn_id: str
    role: MessageRole
    content: JsonValue
    assistant_id: str | None
    created_at: datetime
    sequence: int
    """Position in the session, from 1."""


class FinishedTurn(_Record):
    """Everything one turn leaves behind, written by `Store.persist_turn` in one transaction."""

    session_id: str
    turn_id: str
    assistant_id: str
    status: StreamStatus
    messages: tuple[NewMessage, ...] = ()
    events: tuple[Event, ...] = ()
    """Events not yet appended to the log (stamped, continuing its seq); often the last batch."""
    usage: Usage = Field(default_factory=lambda: Usage(scope="turn"))
    resume: dict[str, JsonValue] = {}
    """Runner name -> resume state to merge into the session's; a None state removes the runner's."""


TurnStatus = StreamStatus | Literal["running"]
"""A turn's row: `running` from its start (`TurnRepository.begin`) until its end is written."""


class TurnRecord(_Record):
    id: str
    session_id: str
    assistant_id: str
    status: TurnStatus
    usage: Usage
    created_at: datetime
    messages: tuple[MessageRecord, ...]


class TurnSummary(_Record):
    """A turn without its messages and usage: whose it is and how it ended (`running` while on)."""

    id: str
    assistant_id: str
    status: TurnStatus


class CheckpointRecord(_Record):
    turn_id: str
    round: int
    payload: dict[str, JsonValue]
    created_at: datetime


class AssistantRecord(_Record):
    id: str
    owner: str
    package: dict[str, JsonValue]
    """The `package.yao` content."""
    prompts: JsonValue
    """The `prompts.yml` content: a list of role/content messages."""
    sandbox: dict[str, JsonValue] | None
    """The `sandbox.yao` content; None for an assistant without a sandbox."""
    created_at: datetime
    updated_at: datetime


class MemoryEntry(_Record):
    space: MemorySpace
    scope_id: str
    """Whose memory: a user id, a team id, a session id or a request id, depending on `space`."""
    key: str
    value: JsonValue
    expires_at: datetime | None
    updated_at: datetime


class KeyInfo(_Record):
    """An API key as the rest of Cage sees it: no hash, no plaintext."""

    id: str
    name: str
    prefix: str
    """The public part of the token (`cage_<prefix>_...`), enough to tell keys apart in a list."""
    role: KeyRole
    owner: str
    created_at: datetime
    last_used_at: datetime | None
    revoked: bool


class AuditRecord(_Record):
    id: int
    actor: str
    action: str
    target: str
    detail: dict[str, JsonValue]
    ts: datetime
