"""The initial schema: chats, turns, messages, the event log, checkpoints, assistants, memory, API keys,
audit.

Revision ID: 0001_initial
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def _when(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _chat_fk(table: str, column: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], ["chats.id"], name=f"fk_{table}_{column}_chats", ondelete="CASCADE"
    )


def upgrade() -> None:
    op.create_table(
        "chats",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("assistant_id", sa.String(200), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        _when("created_at"),
        _when("updated_at"),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("resume", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_chats"),
    )
    op.create_index("ix_chats_owner_updated", "chats", ["owner", "updated_at"])

    op.create_table(
        "turns",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("chat_id", sa.String(64), nullable=False),
        sa.Column("assistant_id", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("usage", sa.JSON(), nullable=False),
        _when("created_at"),
        sa.PrimaryKeyConstraint("id", name="pk_turns"),
        _chat_fk("turns", "chat_id"),
    )
    op.create_index("ix_turns_chat_id", "turns", ["chat_id"])

    op.create_table(
        "messages",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("chat_id", sa.String(64), nullable=False),
        sa.Column("turn_id", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.JSON(), nullable=False),
        sa.Column("assistant_id", sa.String(200), nullable=True),
        _when("created_at"),
        sa.Column("sequence", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_messages"),
        sa.UniqueConstraint("chat_id", "sequence", name="uq_messages_chat_id_sequence"),
        _chat_fk("messages", "chat_id"),
    )
    op.create_index("ix_messages_turn_id", "messages", ["turn_id"])

    op.create_table(
        "events",
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("turn_id", sa.String(64), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("ts", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "seq", name="pk_events"),
        _chat_fk("events", "session_id"),
    )
    op.create_index("ix_events_turn_id", "events", ["turn_id"])

    op.create_table(
        "checkpoints",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("turn_id", sa.String(64), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        _when("created_at"),
        sa.PrimaryKeyConstraint("id", name="pk_checkpoints"),
        sa.UniqueConstraint("turn_id", "round", name="uq_checkpoints_turn_id_round"),
    )

    op.create_table(
        "assistants",
        sa.Column("id", sa.String(200), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("package", sa.JSON(), nullable=False),
        sa.Column("prompts", sa.JSON(), nullable=False),
        sa.Column("sandbox", sa.JSON(), nullable=True),
        _when("created_at"),
        _when("updated_at"),
        sa.PrimaryKeyConstraint("id", name="pk_assistants"),
    )
    op.create_index("ix_assistants_owner", "assistants", ["owner"])

    op.create_table(
        "memory",
        sa.Column("space", sa.String(16), nullable=False),
        sa.Column("scope_id", sa.String(200), nullable=False),
        sa.Column("key", sa.String(500), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        _when("expires_at", nullable=True),
        _when("updated_at"),
        sa.PrimaryKeyConstraint("space", "scope_id", "key", name="pk_memory"),
    )
    op.create_index("ix_memory_expires_at", "memory", ["expires_at"])

    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("prefix", sa.String(32), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        _when("created_at"),
        _when("last_used_at", nullable=True),
        sa.Column("revoked", sa.Boolean(), nullable=False),
        _when("revoked_at", nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_api_keys"),
        sa.UniqueConstraint("prefix", name="uq_api_keys_prefix"),
    )
    op.create_index("ix_api_keys_owner", "api_keys", ["owner"])

    op.create_table(
        "audit",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("action", sa.String(100), nullable=False),
        sa.Column("target", sa.String(300), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        _when("ts"),
        sa.PrimaryKeyConstraint("id", name="pk_audit"),
    )
    op.create_index("ix_audit_actor", "audit", ["actor"])
    op.create_index("ix_audit_ts", "audit", ["ts"])


def downgrade() -> None:
    for table in ("audit", "api_keys", "memory", "assistants", "checkpoints", "events", "messages", "turns"):
        op.drop_table(table)
    op.drop_table("chats")
