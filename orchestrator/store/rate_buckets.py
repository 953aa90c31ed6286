"""Token buckets every replica on one Postgres database shares (revision 0006): one row per key.

```python
granted, tokens = await store.rate_buckets.take("key:" + key_id, per_minute=600.0, burst=120)
```

One statement refills the row from the time elapsed since its last use, takes one token when there
is one, and returns what is left, under the row's lock: two replicas taking at once queue on the row
and never both spend the last token. Elapsed time is the database's clock (`now()`), so the replicas'
clocks do not matter here. `cage serve` on SQLite keeps its buckets in memory instead
(`orchestrator.api.ratelimit.RateLimiter`): one process, no write per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Boolean, Float, String, bindparam, text
from sqlalchemy.orm import Mapped, mapped_column

from orchestrator.store.database import Database
from orchestrator.store.tables import Base


class RateBucketRow(Base):
    """A key's bucket: `tokens` left at `updated_at`; `granted` tells whether the last take got one."""

    __tablename__ = "rate_buckets"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    granted: Mapped[bool] = mapped_column(Boolean)
    updated_at: Mapped[datetime]


@dataclass(frozen=True)
class Take:
    granted: bool
    tokens: float
    """Tokens left after this take (below 1 when refused)."""


_REFILLED = "least(:burst, b.tokens + :rate * extract(epoch FROM now() - b.updated_at))"
_TAKE = text(
    f"""
    INSERT INTO rate_buckets AS b (key, tokens, granted, updated_at)
    VALUES (:key, :burst - 1, true, now())
    ON CONFLICT (key) DO UPDATE SET
        tokens = {_REFILLED} - CASE WHEN {_REFILLED} >= 1 THEN 1 ELSE 0 END,
        granted = {_REFILLED} >= 1,
        updated_at = now()
    RETURNING b.tokens, b.granted
    """
).bindparams(  # typed once here: built per call, the statement cost a third of its round trip
    bindparam("key", type_=String), bindparam("burst", type_=Float), bindparam("rate", type_=Float)
)


class RateBucketRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def take(self, key: str, *, per_minute: float, burst: int) -> Take:
        """Take one token from `key`'s bucket (`burst` at most, `per_minute` refill), in one statement.

        Raises:
            StoreError: the database failed.
        """
        async with self._db.statement() as tx:  # one statement: its own transaction
            params = {"key": key[:255], "burst": float(burst), "rate": per_minute / 60.0}
            row = (await tx.execute(_TAKE, params)).one()
        return Take(granted=bool(row[1]), tokens=float(row[0]))
