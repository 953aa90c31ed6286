"""Rate-limit buckets the replicas on one Postgres database share (`rate_buckets`, one row per key).

SQLite databases get the table too (one schema everywhere) but leave it empty: a single `cage serve`
keeps its buckets in memory.

Revision ID: 0006_rate_buckets
Revises: 0005_replica_leases
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006_rate_buckets"
down_revision: str | None = "0005_replica_leases"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "rate_buckets",
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("granted", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_rate_buckets"),
    )


def downgrade() -> None:
    op.drop_table("rate_buckets")
