"""Websocket tickets every replica on one Postgres database redeems (revision 0007): one row each.

```python
await store.ws_tickets.issue(digest, holder, ttl=30.0)
holder = await store.ws_tickets.redeem(digest)  # the holder once; None when unknown, used or expired
```

A row keeps the SHA-256 of the ticket (`digest`), never the ticket, so a dump of the table opens no
session, and the identity of the key it was issued to. Issuing also deletes the expired rows in the
same transaction. Redeeming is one `DELETE ... RETURNING` of an unexpired row: of two replicas
redeeming one ticket at once, exactly one gets the row. Expiry is the database's clock (`now()`),
so the replicas' clocks do not matter. `cage serve` on SQLite keeps its tickets in memory instead
(`orchestrator.api.tickets.Tickets`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import String, text
from sqlalchemy.orm import Mapped, mapped_column

from orchestrator.store.database import Database
from orchestrator.store.tables import Base


class WsTicketRow(Base):
    """An unredeemed ticket: its digest, the key it stands for, and when it stops working."""

    __tablename__ = "ws_tickets"

    hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_id: Mapped[str] = mapped_column(String(255))
    name: Mapped[str] = mapped_column(String(255))
    owner: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16))
    expires_at: Mapped[datetime] = mapped_column(index=True)


@dataclass(frozen=True)
class TicketHolder:
    """Who a ticket was issued to: the API key's id, name, owner and role."""

    key_id: str
    name: str
    owner: str
    role: str


_PRUNE = text("DELETE FROM ws_tickets WHERE expires_at <= now()")
_ISSUE = text(
    """
    INSERT INTO ws_tickets (hash, key_id, name, owner, role, expires_at)
    VALUES (:hash, :key_id, :name, :owner, :role, now() + make_interval(secs => :ttl))
    """
)
_REDEEM = text(
    """
    DELETE FROM ws_tickets WHERE hash = :hash AND expires_at > now()
    RETURNING key_id, name, owner, role
    """
)


class WsTicketRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def issue(self, digest: str, holder: TicketHolder, *, ttl: float) -> None:
        """Store a ticket's `digest` for `holder`, good for `ttl` seconds; expired rows go first.

        Raises:
            StoreError: the database failed.
        """
        async with self._db.write() as tx:
            await tx.execute(_PRUNE)
            await tx.execute(
                _ISSUE.bindparams(
                    hash=digest,
                    key_id=holder.key_id,
                    name=holder.name,
                    owner=holder.owner,
                    role=holder.role,
                    ttl=float(ttl),
                )
            )

    async def redeem(self, digest: str) -> TicketHolder | None:
        """Take the unexpired ticket with `digest`, once: None when unknown, used or expired.

        Raises:
            StoreError: the database failed.
        """
        async with self._db.write() as tx:
            row = (await tx.execute(_REDEEM.bindparams(hash=digest))).one_or_none()
        if row is None:
            return None
        return TicketHolder(key_id=row[0], name=row[1], owner=row[2], role=row[3])
