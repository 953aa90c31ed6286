"""One name for one concept: the `chats` table becomes `sessions`, and every `chat_id` column
that points at it becomes `session_id` (turns, turn commands, messages, turn leases), with the
indexes and constraints named after the new names. Every row stays where it was.

Postgres renames in place (catalogue changes only, no table is rewritten). SQLite renames the
table and the columns in place too (`ALTER TABLE ... RENAME`, which also rewrites the foreign keys
that name them), then rebuilds the tables whose constraint names carry the old words (batch mode,
foreign keys off while the migration runner runs, checked before it commits).

Revision ID: 0008_sessions
Revises: 0007_ws_tickets
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

revision: str = "0008_sessions"
down_revision: str | None = "0007_ws_tickets"
branch_labels: str | None = None
depends_on: str | None = None

CHILDREN = ("turns", "turn_commands", "messages", "turn_leases")
"""Tables with a `chat_id` column referencing `chats.id` (`events` says `session_id` already)."""

INDEXES = {
    "sessions": [
        ("ix_chats_owner_updated", "ix_sessions_owner_updated", ["owner", "updated_at"]),
        ("ix_chats_parent_id", "ix_sessions_parent_id", ["parent_id"]),
    ],
    "turns": [("ix_turns_chat_id", "ix_turns_session_id", ["session_id"])],
    "turn_commands": [("ix_turn_commands_chat_id", "ix_turn_commands_session_id", ["session_id"])],
}
"""Per table after the rename: (old index name, new name, columns)."""

FOREIGN_KEYS = {
    "sessions": ("fk_chats_parent_id_chats", "fk_sessions_parent_id_sessions", "parent_id"),
    "turns": ("fk_turns_chat_id_chats", "fk_turns_session_id_sessions", "session_id"),
    "turn_commands": ("fk_turn_commands_chat_id_chats", "fk_turn_commands_session_id_sessions", "session_id"),
    "messages": ("fk_messages_chat_id_chats", "fk_messages_session_id_sessions", "session_id"),
    "turn_leases": ("fk_turn_leases_chat_id_chats", "fk_turn_leases_session_id_sessions", "session_id"),
    "events": ("fk_events_session_id_chats", "fk_events_session_id_sessions", "session_id"),
}
"""Per table after the rename: (old name, new name, column) of its foreign key to `sessions.id`
(every one `ON DELETE CASCADE`)."""

UNIQUES = {
    "sessions": ("uq_chats_owner_client_id", "uq_sessions_owner_client_id", ["owner", "client_id"]),
    "messages": (
        "uq_messages_chat_id_sequence",
        "uq_messages_session_id_sequence",
        ["session_id", "sequence"],
    ),
    "turn_leases": ("uq_turn_leases_chat_id", "uq_turn_leases_session_id", ["session_id"]),
}
"""Per table after the rename: (old name, new name, columns) of its unique constraint."""


def upgrade() -> None:
    op.rename_table("chats", "sessions")
    for child in CHILDREN:
        op.alter_column(child, "chat_id", new_column_name="session_id")
    _rename_names(forward=True)


def downgrade() -> None:
    _rename_names(forward=False)
    for child in CHILDREN:
        op.alter_column(child, "session_id", new_column_name="chat_id")
    op.rename_table("sessions", "chats")


def _rename_names(*, forward: bool) -> None:
    """The indexes and constraints of the (renamed) tables: old names to new, or back."""

    def way(old: str, new: str) -> tuple[str, str]:
        return (old, new) if forward else (new, old)

    if op.get_bind().dialect.name == "postgresql":
        renames = [("sessions", "pk_chats", "pk_sessions")]
        renames += [(table, old, new) for table, (old, new, _) in [*FOREIGN_KEYS.items(), *UNIQUES.items()]]
        for table, old, new in renames:
            op.execute('ALTER TABLE "{}" RENAME CONSTRAINT "{}" TO "{}"'.format(table, *way(old, new)))
        for rows in INDEXES.values():
            for old, new, _ in rows:
                op.execute('ALTER INDEX "{}" RENAME TO "{}"'.format(*way(old, new)))
        return
    # SQLite keeps constraint names in each table's `CREATE TABLE` text: a name changes only by
    # rebuilding the table (batch mode); an index is dropped and made again under its new name.
    for table, rows in INDEXES.items():
        for old, new, columns in rows:
            drop, create = way(old, new)
            op.drop_index(drop, table_name=table)
            op.create_index(create, table, columns)
    for table in sorted(FOREIGN_KEYS.keys() | UNIQUES.keys()):
        with op.batch_alter_table(table, recreate="always") as batch:
            if table in FOREIGN_KEYS:
                old, new, column = FOREIGN_KEYS[table]
                drop, create = way(old, new)
                batch.drop_constraint(drop, type_="foreignkey")
                batch.create_foreign_key(create, "sessions", [column], ["id"], ondelete="CASCADE")
            if table in UNIQUES:
                old, new, columns = UNIQUES[table]
                drop, create = way(old, new)
                batch.drop_constraint(drop, type_="unique")
                batch.create_unique_constraint(create, columns)
