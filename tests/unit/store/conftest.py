"""Store fixtures: every test that takes `store` runs twice, on a SQLite file and on Postgres.

Postgres comes from `CAGE_TEST_POSTGRES_URL` or, when that is unset, from
`scripts/ensure-postgres.sh` (`tests/postgres_cluster.py`: one worker at a time starts it; a cluster
the run had to start is stopped again at the run's end). Without Postgres the `postgres` tests skip with the reason, except when
`CI` is set: then they fail. Each Postgres test gets a database of its own, dropped afterwards.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from orchestrator.store import Store
from tests import postgres_cluster
from tests.postgres_cluster import ENSURE_POSTGRES as ENSURE_POSTGRES
from tests.run_ids import WORKER


class FakeClock:
    """A settable UTC clock: TTL and `last_used` tests move time instead of sleeping."""

    def __init__(self) -> None:
        self.now = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a Postgres database whose role may create databases."""
    given = os.environ.get("CAGE_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    try:
        url = postgres_cluster.ensure()
    except postgres_cluster.NoPostgres as exc:
        _no_postgres(str(exc))
    yield url
    if not WORKER:  # under xdist other workers still use it: the controller stops it (tests/conftest.py)
        postgres_cluster.stop_if_started()


def _no_postgres(reason: str) -> None:
    reason = f"no Postgres for the store tests: {reason}; set CAGE_TEST_POSTGRES_URL or run as root"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh, empty database: a SQLite file under `tmp_path`, or a new Postgres database."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'data' / 'cage.db'}"
        return
    base = make_url(request.getfixturevalue("postgres_url"))
    name = f"cage_t_{uuid.uuid4().hex[:16]}"
    admin = create_async_engine(base, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield base.set(database=name).render_as_string(hide_password=False)
        await _drop(admin, name)
    finally:
        await admin.dispose()


async def _drop(admin: AsyncEngine, name: str) -> None:
    """Drop the test's database. FORCE ends the test's own leftover connections, but not an
    autovacuum worker (the test role may not signal it; more likely under parallel load): while one
    is in the database the drop is refused, so try again until it has left (at most ~10 s)."""
    for attempt in range(100):
        try:
            async with admin.connect() as conn:
                await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            return
        except ProgrammingError as exc:
            if "pg_signal_backend" not in str(exc) or attempt == 99:
                raise
            await asyncio.sleep(0.1)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(database_url: str, clock: FakeClock) -> AsyncIterator[Store]:
    """A migrated store on the fake clock."""
    st = Store.from_url(database_url, clock=clock)
    await st.migrate()
    yield st
    await st.aclose()


@pytest.fixture
async def other(database_url: str, clock: FakeClock, store: Store) -> AsyncIterator[Store]:
    """A second replica's store on the same (migrated) database, on the same clock."""
    st = Store.from_url(database_url, clock=clock)
    yield st
    await st.aclose()
