"""Response models shared by more than one router."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from orchestrator.store import ChatRecord

CHAT_ID = r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$"
"""Session ids: they name session sandboxes too, so only `[A-Za-z0-9_.-]`, at most 64 characters
(the store's and the sandbox identity's limit), and no leading dot (no `.` or `..`)."""
MAX_TOKENS = 10_000_000
"""Largest `max_tokens` a request may ask for."""
MAX_TURN_SECONDS = 7 * 86400
"""Longest `turn_timeout` a request may ask for."""
MAX_SEQ = 2**62
"""Largest `after_seq` accepted (a 64-bit integer column holds every real seq)."""


class SessionView(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    """The session's id as its owner names it (unique per owner; another owner may use the same)."""
    owner: str
    assistant_id: str
    title: str
    created_at: datetime
    updated_at: datetime
    last_seq: int
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    running_turn_id: str | None = None
    parent_id: str | None = None
    """A sub-agent's child session: the id of the session whose turn started it."""

    @classmethod
    def of(cls, chat: ChatRecord, running_turn_id: str | None = None) -> SessionView:
        return cls(
            id=chat.client_id,
            owner=chat.owner,
            assistant_id=chat.assistant_id,
            title=chat.title,
            created_at=chat.created_at,
            updated_at=chat.updated_at,
            last_seq=chat.last_seq,
            metadata=chat.metadata,
            running_turn_id=running_turn_id,
            parent_id=_parent_session(chat),
        )


def _parent_session(chat: ChatRecord) -> str | None:
    if chat.parent_id is None:
        return None
    named = chat.metadata.get("parent_session")
    return named if isinstance(named, str) else chat.parent_id


class TurnAccepted(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    turn_id: str
    chat_id: str
    force: bool = False
