"""Leases between replicas on one database (`replicas`, `turn_leases`, `leader_leases`): who is
alive, which replica runs the running turn of each chat (one per chat), and who runs the upkeep.

Turns still `running` from before this revision have no lease: the next start's recovery closes them,
as it always did.

Revision ID: 0005_replica_leases
Revises: 0004_turn_commands
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005_replica_leases"
down_revision: str | None = "0004_turn_commands"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "replicas",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_replicas"),
    )
    op.create_index("ix_replicas_expires_at", "replicas", ["expires_at"])
    op.create_table(
        "turn_leases",
        sa.Column("turn_id", sa.String(64), nullable=False),
        sa.Column("chat_id", sa.String(64), nullable=False),
        sa.Column("replica_id", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["turn_id"], ["turns.id"], name="fk_turn_leases_turn_id_turns", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["chat_id"], ["chats.id"], name="fk_turn_leases_chat_id_chats", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("turn_id", name="pk_turn_leases"),
        sa.UniqueConstraint("chat_id", name="uq_turn_leases_chat_id"),
    )
    op.create_index("ix_turn_leases_replica_id", "turn_leases", ["replica_id"])
    op.create_index("ix_turn_leases_expires_at", "turn_leases", ["expires_at"])
    op.create_table(
        "leader_leases",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("replica_id", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_leader_leases"),
    )


def downgrade() -> None:
    op.drop_table("leader_leases")
    op.drop_index("ix_turn_leases_expires_at", table_name="turn_leases")
    op.drop_index("ix_turn_leases_replica_id", table_name="turn_leases")
    op.drop_table("turn_leases")
    op.drop_index("ix_replicas_expires_at", table_name="replicas")
    op.drop_table("replicas")
