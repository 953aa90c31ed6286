"""Chat ids per owner (`chats.client_id`, unique with `owner`) and sub-agent child chats
(`chats.parent_id`).

The id a client chooses is `client_id`; the primary key `id` becomes internal (a digest of owner and
client id for new chats), so events, turns, messages and checkpoints keep their `chat_id` keys.
Existing chats keep their id and get `client_id = id`: each stays reachable under the id its owner
knew.

On SQLite the second step rebuilds `chats` (batch mode); the migration runner keeps foreign keys off
while it runs, so dropping the old table does not cascade into the turns, messages and events, and
checks them all before it commits.

Revision ID: 0003_chat_client_ids
Revises: 0002_teams
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003_chat_client_ids"
down_revision: str | None = "0002_teams"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("chats") as batch:
        batch.add_column(sa.Column("client_id", sa.String(64), nullable=True))
        batch.add_column(sa.Column("parent_id", sa.String(64), nullable=True))
    op.execute("UPDATE chats SET client_id = id")
    with op.batch_alter_table("chats") as batch:
        batch.alter_column("client_id", existing_type=sa.String(64), nullable=False)
        batch.create_unique_constraint("uq_chats_owner_client_id", ["owner", "client_id"])
        batch.create_foreign_key(
            "fk_chats_parent_id_chats", "chats", ["parent_id"], ["id"], ondelete="CASCADE"
        )
        batch.create_index("ix_chats_parent_id", ["parent_id"])


def downgrade() -> None:
    with op.batch_alter_table("chats") as batch:
        batch.drop_index("ix_chats_parent_id")
        batch.drop_constraint("fk_chats_parent_id_chats", type_="foreignkey")
        batch.drop_constraint("uq_chats_owner_client_id", type_="unique")
        batch.drop_column("parent_id")
        batch.drop_column("client_id")
