"""Websocket tickets: a browser cannot set an `Authorization` header on a websocket, and a key in
a URL ends up in histories and proxy logs. So a client trades its key for a ticket
(`POST /v1/sessions/ws-ticket`), short-lived and good for one connection, and puts that in the
websocket URL (`?ticket=`).

`Tickets` keeps them in this process's memory (a restart voids them, which is harmless): the
single `cage serve` on SQLite. `SharedTickets` keeps a SHA-256 of each in the database's
`ws_tickets` rows, so a ticket one replica issued opens a websocket on any replica on the same
Postgres database, once (`ApiState.build` picks it on Postgres); both are `WsTickets`. The caller
still checks that the key behind a redeemed ticket was not revoked meanwhile.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from orchestrator.api.auth import Principal
from orchestrator.store.ws_tickets import TicketHolder, WsTicketRepository

MAX_OPEN = 10_000
"""Unredeemed tickets kept at most in memory (the oldest are dropped first)."""


class WsTickets(Protocol):
    ttl: float
    """Seconds a ticket stays valid."""

    async def issue(self, principal: Principal) -> str:
        """A new ticket standing for `principal`.

        Raises:
            StoreError: the database failed.
        """
        ...

    async def redeem(self, ticket: str) -> Principal | None:
        """The ticket's principal, once; None when unknown, used or expired.

        Raises:
            StoreError: the database failed.
        """
        ...


def _new_ticket() -> str:
    return "wst_" + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class _Ticket:
    principal: Principal
    expires: float


class Tickets:
    def __init__(self, ttl: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._open: dict[str, _Ticket] = {}

    async def issue(self, principal: Principal) -> str:
        now = self._clock()
        self._open = {t: v for t, v in self._open.items() if v.expires > now}
        while len(self._open) >= MAX_OPEN:
            self._open.pop(next(iter(self._open)))
        ticket = _new_ticket()
        self._open[ticket] = _Ticket(principal, now + self.ttl)
        return ticket

    async def redeem(self, ticket: str) -> Principal | None:
        """The ticket's principal, once; None when unknown, used or expired."""
        found = self._open.pop(ticket, None)
        if found is None or found.expires <= self._clock():
            return None
        return found.principal


def ticket_digest(ticket: str) -> str:
    """What the database keeps of a ticket: its SHA-256, hex."""
    return hashlib.sha256(ticket.encode()).hexdigest()


class SharedTickets:
    """Tickets in the database (`WsTicketRepository`): issued on one replica, redeemed on any."""

    def __init__(self, rows: WsTicketRepository, ttl: float) -> None:
        self.ttl = ttl
        self._rows = rows

    async def issue(self, principal: Principal) -> str:
        ticket = _new_ticket()
        holder = TicketHolder(
            key_id=principal.key_id, name=principal.name, owner=principal.owner, role=principal.role
        )
        await self._rows.issue(ticket_digest(ticket), holder, ttl=self.ttl)
        return ticket

    async def redeem(self, ticket: str) -> Principal | None:
        """The ticket's principal, once across every replica; None when unknown, used or expired."""
        if not ticket.startswith("wst_") or len(ticket) > 128:
            return None
        holder = await self._rows.redeem(ticket_digest(ticket))
        if holder is None or holder.role not in ("admin", "user"):
            return None
        role = "admin" if holder.role == "admin" else "user"
        return Principal(key_id=holder.key_id, name=holder.name, owner=holder.owner, role=role)
