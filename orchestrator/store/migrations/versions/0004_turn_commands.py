"""Steering commands between replicas (`turn_commands`): an interrupt or an answer sent to one
`cage serve` for a turn another one runs waits here until the replica holding the turn claims it.

Revision ID: 0004_turn_commands
Revises: 0003_chat_client_ids
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004_turn_commands"
down_revision: str | None = "0003_chat_client_ids"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "turn_commands",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("chat_id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("claimed_by", sa.String(64), nullable=True),
        sa.Column("outcome", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["chat_id"], ["chats.id"], name="fk_turn_commands_chat_id_chats", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_turn_commands"),
    )
    op.create_index("ix_turn_commands_chat_id", "turn_commands", ["chat_id"])
    op.create_index("ix_turn_commands_created_at", "turn_commands", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_turn_commands_created_at", table_name="turn_commands")
    op.drop_index("ix_turn_commands_chat_id", table_name="turn_commands")
    op.drop_table("turn_commands")
