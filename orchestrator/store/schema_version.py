"""The schema revision this version of Cage expects, and a check that needs no Alembic.

`Store.migrate()` runs on every start (every `cage run`, every server start). Importing Alembic and
reading its revision scripts costs about as much as the rest of a CLI run's set-up, and on every
start after the first the database is already at head, so the check reads the one row Alembic keeps
in `alembic_version` through the store's own engine and only runs Alembic when it differs (a new
database, an older schema, or a newer one, whose upgrade then fails as before).
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from orchestrator.store.database import Database
from orchestrator.store.errors import StoreError

HEAD_REVISION = "0008_sessions"
"""The newest revision in `migrations/versions`; a unit test keeps it equal to Alembic's head."""


async def at_head(db: Database) -> bool:
    """True when the database's `alembic_version` holds exactly `HEAD_REVISION`.

    False for anything else, including no such table yet or a database that cannot be read:
    the caller then runs the full migration, which reports a real failure itself.
    """
    try:
        async with db.read() as tx:
            rows = (await tx.execute(text("SELECT version_num FROM alembic_version"))).scalars().all()
    except (StoreError, DBAPIError):  # no such table: OperationalError (SQLite), ProgrammingError (Postgres)
        return False
    return list(rows) == [HEAD_REVISION]
