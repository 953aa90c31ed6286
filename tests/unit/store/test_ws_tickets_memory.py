"""The in-memory `Tickets` of a single `cage serve` on SQLite: the same interface as `SharedTickets`."""

from __future__ import annotations

from orchestrator.api.auth import Principal
from orchestrator.api.tickets import Tickets

ALICE = Principal(key_id="key-alice", name="alice's key", owner="alice", role="user")


async def test_a_ticket_opens_once_and_not_after_its_ttl() -> None:
    now = [0.0]
    tickets = Tickets(30.0, clock=lambda: now[0])
    ticket = await tickets.issue(ALICE)
    assert await tickets.redeem(ticket) == ALICE
    assert await tickets.redeem(ticket) is None
    late = await tickets.issue(ALICE)
    now[0] = 31.0
    assert await tickets.redeem(late) is None
    assert await tickets.redeem("wst_unknown") is None
