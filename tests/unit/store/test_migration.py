"""Migrations: idempotent, in step with `tables.py`, shipped inside the package."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from orchestrator.settings import Settings
from orchestrator.store import Store, StoreError
from orchestrator.store.migration import MIGRATIONS_DIR, current_revision, head_revision, schema_diff
from orchestrator.store.tables import Base

TABLES = {
    "sessions",
    "turns",
    "messages",
    "events",
    "checkpoints",
    "assistants",
    "memory",
    "api_keys",
    "audit",
}
TABLES |= {"team_members", "turn_commands", "replicas", "turn_leases", "leader_leases", "rate_buckets"}
TABLES |= {"ws_tickets"}


async def _tables(url: str) -> set[str]:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            return set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
    finally:
        await engine.dispose()


async def test_migrate_creates_every_table_and_is_idempotent(database_url: str) -> None:
    url = make_url(database_url)
    assert await current_revision(url) is None
    async with Store.from_url(database_url) as store:
        await store.migrate()
        session = await store.sessions.create("alice", "tests.echo")
        await store.migrate()  # the second run changes nothing and loses nothing
        assert await store.sessions.get(session.id) == session
    assert await current_revision(url) == head_revision() == "0008_sessions"
    assert await _tables(database_url) == TABLES | {"alembic_version"}
    assert set(Base.metadata.tables) == TABLES


async def test_the_migrated_schema_matches_the_models(store: Store) -> None:
    assert await schema_diff(store.url) == []


async def test_schema_diff_notices_a_missing_migration(database_url: str) -> None:
    """The drift check can fail: on an empty database every table is reported as missing."""
    diff = await schema_diff(make_url(database_url))
    added = {op[1].name for op in diff if op[0] == "add_table"}
    assert added == TABLES


def test_migrations_ship_inside_the_package() -> None:
    assert MIGRATIONS_DIR.is_dir() and (MIGRATIONS_DIR / "env.py").is_file()
    assert (MIGRATIONS_DIR / "script.py.mako").is_file()
    assert [p.name for p in sorted((MIGRATIONS_DIR / "versions").glob("0*.py"))] == [
        "0001_initial.py",
        "0002_teams.py",
        "0003_chat_client_ids.py",
        "0004_turn_commands.py",
        "0005_replica_leases.py",
        "0006_rate_buckets.py",
        "0007_ws_tickets.py",
        "0008_sessions.py",
    ]
    assert not list(Path(MIGRATIONS_DIR).rglob("alembic.ini"))


async def test_from_settings_uses_a_sqlite_file_under_the_data_dir(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "nested" / "data")
    async with Store.from_settings(settings) as store:
        assert store.dialect == "sqlite"
        await store.migrate()
        await store.sessions.create("alice", "tests.echo", session_id="c")
    assert (tmp_path / "nested" / "data" / "cage.db").is_file()
    async with Store.from_settings(settings) as again:
        assert (await again.sessions.require("c")).owner == "alice"


async def test_an_unreachable_database_is_a_store_error_without_the_password() -> None:
    store = Store.from_url("postgresql+asyncpg://cage:hunter2-secret@127.0.0.1:1/nothing")
    try:
        with pytest.raises(StoreError) as err:
            await store.migrate()
        assert "hunter2" not in str(err.value)
        with pytest.raises(StoreError) as err2:
            await store.sessions.get("x")
        assert "hunter2" not in str(err2.value) and "unavailable" in str(err2.value)
    finally:
        await store.aclose()
        await store.aclose()  # idempotent
