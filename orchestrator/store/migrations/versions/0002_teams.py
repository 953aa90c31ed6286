"""Team membership (`team_members`): the `team` memory space comes from it, not from requests.

Revision ID: 0002_teams
Revises: 0001_initial
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002_teams"
down_revision: str | None = "0001_initial"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "team_members",
        sa.Column("team", sa.String(128), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("team", "owner", name="pk_team_members"),
    )
    op.create_index("ix_team_members_owner", "team_members", ["owner"])


def downgrade() -> None:
    op.drop_index("ix_team_members_owner", table_name="team_members")
    op.drop_table("team_members")
