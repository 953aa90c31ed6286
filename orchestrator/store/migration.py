"""Alembic, driven from code: `upgrade()` at start-up, `schema_diff()` for the drift test,
`new_revision()` for whoever changes `tables.py`.

Alembic is synchronous (it reads its scripts from disk and runs DDL through a sync connection), so
each entry point runs in a worker thread with its own event loop and a one-connection engine: the
caller's event loop never blocks on it.

On SQLite a migration runs with foreign keys off (`PRAGMA foreign_keys` cannot change inside a
transaction, so it is set as the connection opens): a batch-mode revision rebuilds a table by
copying it and dropping the old one, and with foreign keys on that drop would cascade into every
table referencing it. `PRAGMA foreign_key_check` then runs before the commit: a revision that leaves
a dangling reference fails and changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection
from sqlalchemy.pool import ConnectionPoolEntry, NullPool

from orchestrator.store.database import create_engine, db_errors, ensure_sqlite_dir, writing
from orchestrator.store.errors import StoreError
from orchestrator.store.tables import Base

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
_T = TypeVar("_T")


def alembic_config() -> Config:
    """An Alembic config with no ini file: the script location inside the installed package."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def head_revision() -> str:
    """The newest revision shipped with this version of Cage."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise StoreError("no migration revisions found")
    return head


async def upgrade(url: URL, revision: str = "head") -> None:
    """Migrate the database at `url` to `revision`; a no-op when it is there already.

    Raises:
        StoreError: the database cannot be reached or a revision fails.
    """
    await _migrate(url, revision, command.upgrade)


async def downgrade(url: URL, revision: str) -> None:
    """Migrate the database at `url` back to `revision` (each revision's `downgrade`, newest first),
    to run an older Cage on it again.

    Raises:
        StoreError: the database cannot be reached or a revision fails.
    """
    await _migrate(url, revision, command.downgrade)


async def _migrate(url: URL, revision: str, step: Callable[[Config, str], None]) -> None:
    def run(conn: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = conn
        try:
            step(config, revision)
        except CommandError as err:
            raise StoreError(f"migration to {revision} failed: {err}") from err
        if conn.dialect.name == "sqlite":
            dangling = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if dangling:
                raise StoreError(
                    f"migration to {revision} left {len(dangling)} dangling references: {dangling[:3]}"
                )

    await _in_thread(url, run)


async def current_revision(url: URL) -> str | None:
    """The revision the database is at; None before the first migration."""
    return await _in_thread(url, lambda conn: MigrationContext.configure(conn).get_current_revision())


async def schema_diff(url: URL) -> list[Any]:
    """Differences between `tables.py` and the database's schema (Alembic's autogenerate ops)."""

    def compare(conn: Connection) -> list[Any]:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(ctx, Base.metadata))

    return await _in_thread(url, compare)


async def new_revision(url: URL, message: str) -> None:
    """Write a new revision file from the difference between `tables.py` and the database at `url`
    (which should be migrated to head first). Review the generated file, run `ruff check --fix` and
    `ruff format` on it, and add a test for any data it moves, before committing it."""

    def run(conn: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.revision(config, message=message, autogenerate=True)

    await _in_thread(url, run)


async def _in_thread(url: URL, fn: Callable[[Connection], _T]) -> _T:
    return await anyio.to_thread.run_sync(_run_blocking, url, fn)


def _run_blocking(url: URL, fn: Callable[[Connection], _T]) -> _T:
    ensure_sqlite_dir(url)

    async def main() -> _T:
        engine = create_engine(url, poolclass=NullPool)
        if engine.dialect.name == "sqlite":
            event.listen(engine.sync_engine, "connect", _foreign_keys_off)
        try:
            with db_errors():
                async with writing(engine).begin() as conn:
                    return await conn.run_sync(fn)
        finally:
            await engine.dispose()

    return asyncio.run(main())


def _foreign_keys_off(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    # Runs after the engine's own connect hook, which turned them on.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=OFF")
    cursor.close()
