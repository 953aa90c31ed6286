"""`INSERT ... ON CONFLICT DO UPDATE` for the two engines the store supports."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from orchestrator.store.errors import StoreError
from orchestrator.store.tables import Base


async def upsert(
    tx: AsyncSession, table: type[Base], values: Mapping[str, Any], *, keys: Sequence[str]
) -> None:
    """Insert `values`, or update every non-key column of the row with the same `keys`."""
    dialect = tx.get_bind().dialect.name
    if dialect == "postgresql":
        pg = postgresql.insert(table).values(**values)
        update = {name: pg.excluded[name] for name in values if name not in keys}
        await tx.execute(pg.on_conflict_do_update(index_elements=list(keys), set_=update))
    elif dialect == "sqlite":
        lite = sqlite.insert(table).values(**values)
        update = {name: lite.excluded[name] for name in values if name not in keys}
        await tx.execute(lite.on_conflict_do_update(index_elements=list(keys), set_=update))
    else:
        raise StoreError(f"unsupported database engine {dialect!r} (use SQLite or Postgres)")
