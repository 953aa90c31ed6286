"""`Store.migrate()` skips Alembic when the database is at head, and still migrates otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sqlalchemy.engine import make_url

from orchestrator.store import Store
from orchestrator.store.database import Database, create_engine
from orchestrator.store.migration import current_revision, head_revision, upgrade
from orchestrator.store.schema_version import HEAD_REVISION, at_head

ROOT = Path(__file__).resolve().parents[3]


def test_the_constant_is_alembics_head() -> None:
    assert head_revision() == HEAD_REVISION


async def test_at_head_only_when_the_version_row_is_the_head(database_url: str) -> None:
    url = make_url(database_url)
    db = Database(create_engine(url))
    try:
        assert not await at_head(db)  # no alembic_version table yet
        await upgrade(url, "0002_teams")
        assert not await at_head(db)
        await upgrade(url)
        assert await at_head(db)
    finally:
        await db.aclose()


async def test_migrate_still_upgrades_an_older_schema(database_url: str) -> None:
    url = make_url(database_url)
    await upgrade(url, "0002_teams")
    async with Store.from_url(database_url) as store:
        await store.migrate()
    assert await current_revision(url) == HEAD_REVISION


PROBE = """
import anyio, json, sys
from orchestrator.store import Store
async def main():
    async with Store.from_url({url!r}) as store:
        await store.migrate()
anyio.run(main)
print(json.dumps("alembic" in sys.modules))
"""


def _migrate_in_fresh_interpreter(url: str) -> bool:
    """Whether `Store.migrate()` imported Alembic, run in a new interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(url=url)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    loaded: bool = json.loads(result.stdout.strip().splitlines()[-1])
    return loaded


def test_a_start_at_head_does_not_import_alembic(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'data' / 'cage.db'}"
    assert _migrate_in_fresh_interpreter(url)  # the first start migrates
    assert not _migrate_in_fresh_interpreter(url)  # every later one reads one row
