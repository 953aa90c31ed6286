"""Alembic environment: runs on the connection `orchestrator.store.migration` passes in.

There is no `alembic.ini` and no URL here: `Store.migrate()` (upgrade) and
`orchestrator.store.migration.new_revision()` (autogenerate) open the connection themselves and put it
in `config.attributes["connection"]`. SQLite gets batch mode, so later revisions can alter tables.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from orchestrator.store.errors import StoreError
from orchestrator.store.tables import Base


def run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise StoreError("offline (--sql) migrations are not supported; use Store.migrate()")
_connection = context.config.attributes.get("connection")
if not isinstance(_connection, Connection):
    raise StoreError("migrations run through Store.migrate(), which passes the connection in")
run_migrations(_connection)
