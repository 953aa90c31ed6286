"""Websocket tickets: a browser cannot set an `Authorization` header on a websocket, and a key in
a URL ends up in histories and proxy logs. So a client trades its key for a ticket
(`POST /v1/sessions/ws-ticket`), short-lived and good for one connection, and puts that in the
websocket URL (`?ticket=`). Tickets live in memory only: a restart voids them, which is harmless.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.api.auth import Principal

MAX_OPEN = 10_000
"""Unredeemed tickets kept at most (the oldest are dropped first)."""


@dataclass(frozen=True)
class _Ticket:
    principal: Principal
    expires: float


class Tickets:
    def __init__(self, ttl: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._open: dict[str, _Ticket] = {}

    def issue(self, principal: Principal) -> str:
        now = self._clock()
        self._open = {t: v for t, v in self._open.items() if v.expires > now}
        while len(self._open) >= MAX_OPEN:
            self._open.pop(next(iter(self._open)))
        ticket = "wst_" + secrets.token_urlsafe(32)
        self._open[ticket] = _Ticket(principal, now + self.ttl)
        return ticket

    def redeem(self, ticket: str) -> Principal | None:
        """The ticket's principal, once; None when unknown, used or expired."""
        found = self._open.pop(ticket, None)
        if found is None or found.expires <= self._clock():
            return None
        return found.principal
