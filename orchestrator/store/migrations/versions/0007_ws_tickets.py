"""Websocket tickets any replica on one Postgres database redeems (`ws_tickets`, one row per ticket).

A row holds the SHA-256 of the ticket, never the ticket: a dump of the table opens no session.
SQLite databases get the table too (one schema everywhere) but leave it empty: a single `cage serve`
keeps its tickets in memory.

Revision ID: 0007_ws_tickets
Revises: 0006_rate_buckets
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0007_ws_tickets"
down_revision: str | None = "0006_rate_buckets"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "ws_tickets",
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("key_id", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("hash", name="pk_ws_tickets"),
    )
    op.create_index("ix_ws_tickets_expires_at", "ws_tickets", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_ws_tickets_expires_at", table_name="ws_tickets")
    op.drop_table("ws_tickets")
