"""The database schema as SQLAlchemy declarative models. Nothing outside `orchestrator.store` sees them.

Every timestamp is a timezone-aware UTC `datetime` (`UTCDateTime`): SQLite keeps no zone, so the
type puts UTC back on the way out and both engines hand back the same value. JSON columns use the
generic `JSON` type (`json` on Postgres, text on SQLite).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Named constraints: SQLite batch migrations can only alter constraints that have a name."""


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every engine; naive values are refused on the way in."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use an aware UTC datetime")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime, dict[str, Any]: JSON, Any: JSON}


def table(row: type[Base]) -> Table:
    """A model's table, for Core statements (no ORM object, no flush)."""
    return Base.metadata.tables[row.__tablename__]


class SessionRow(Base):
    """A session, which is also a websocket session: its event log hangs off it."""

    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    """Internal: a digest of owner and client id (`orchestrator.store.sessions.internal_session_id`), a
    random id for a server-chosen one, or the id itself for sessions made before revision 0003."""
    owner: Mapped[str] = mapped_column(String(128))
    client_id: Mapped[str] = mapped_column(String(64))
    """The id the owner chose and sees; unique per owner, so two owners may use the same one."""
    parent_id: Mapped[str | None] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    """The parent session of a sub-agent's child session (internal id); None for a top-level session."""
    assistant_id: Mapped[str] = mapped_column(String(200))
    title: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    last_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    """Seq of the last event in the log; moved by a compare-and-set so appends cannot race."""
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    resume: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    """Runner name -> that runner's resume state (e.g. Claude's session id)."""

    __table_args__ = (
        Index("ix_sessions_owner_updated", "owner", "updated_at"),
        UniqueConstraint("owner", "client_id"),
    )


class TurnRow(Base):
    """One turn of a session: its final status and usage, written by `persist_turn`."""

    __tablename__ = "turns"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    assistant_id: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))
    usage: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime]


class TurnCommandRow(Base):
    """A steering command sent on one replica for a turn another one runs (interrupt, an answer):
    the replica holding the turn claims it, acts, and writes the outcome the sender reports."""

    __tablename__ = "turn_commands"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    claimed_by: Mapped[str | None] = mapped_column(String(64))
    outcome: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    created_at: Mapped[datetime] = mapped_column(index=True)


class MessageRow(Base):
    __tablename__ = "messages"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    turn_id: Mapped[str] = mapped_column(String(64), index=True)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[Any] = mapped_column(JSON)
    assistant_id: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime]
    sequence: Mapped[int] = mapped_column(Integer)
    """Position in the session, from 1, assigned by the store."""

    __table_args__ = (UniqueConstraint("session_id", "sequence"),)


class EventRow(Base):
    """The per-session event log, the source of websocket replay (`after_seq`)."""

    __tablename__ = "events"

    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    """The (session_id, seq) primary key is the index `after()` reads in order."""
    turn_id: Mapped[str] = mapped_column(String(64), index=True)
    type: Mapped[str] = mapped_column(String(32))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    """The whole event in its wire form (`dump_event`)."""
    ts: Mapped[int] = mapped_column(BigInteger)
    """Milliseconds since the epoch, as stamped by the emitter."""


class CheckpointRow(Base):
    __tablename__ = "checkpoints"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    turn_id: Mapped[str] = mapped_column(String(64))
    round: Mapped[int] = mapped_column(Integer)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime]

    __table_args__ = (UniqueConstraint("turn_id", "round"),)


class AssistantRow(Base):
    """An assistant created over the API (assistants on disk are not stored)."""

    __tablename__ = "assistants"

    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128), index=True)
    package: Mapped[dict[str, Any]] = mapped_column(JSON)
    prompts: Mapped[Any] = mapped_column(JSON)
    sandbox: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class MemoryRow(Base):
    __tablename__ = "memory"

    space: Mapped[str] = mapped_column(String(16), primary_key=True)
    scope_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    key: Mapped[str] = mapped_column(String(500), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON)
    expires_at: Mapped[datetime | None] = mapped_column(index=True)
    updated_at: Mapped[datetime]


class ApiKeyRow(Base):
    """An API key: its lookup prefix and the SHA-256 of the whole token, never the token itself."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(32), unique=True)
    hash: Mapped[str] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(16))
    owner: Mapped[str] = mapped_column(String(128), index=True)
    created_at: Mapped[datetime]
    last_used_at: Mapped[datetime | None]
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    revoked_at: Mapped[datetime | None]


class TeamMemberRow(Base):
    """One owner's membership of one team (set by an admin; decides the `team` memory space)."""

    __tablename__ = "team_members"

    team: Mapped[str] = mapped_column(String(128), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128), primary_key=True, index=True)
    created_at: Mapped[datetime]


class AuditRow(Base):
    __tablename__ = "audit"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    actor: Mapped[str] = mapped_column(String(128), index=True)
    action: Mapped[str] = mapped_column(String(100))
    target: Mapped[str] = mapped_column(String(300))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON)
    ts: Mapped[datetime] = mapped_column(index=True)
