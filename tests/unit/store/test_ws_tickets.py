"""`ws_tickets` on real Postgres: a ticket one store (one replica) issued is redeemed on another, once."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from sqlalchemy import text

from orchestrator.api.auth import Principal
from orchestrator.api.tickets import SharedTickets, ticket_digest
from orchestrator.store import Store

pytestmark = pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)

ALICE = Principal(key_id="key-alice", name="alice's key", owner="alice", role="user")
TTL = 600.0
"""Long enough that nothing expires by itself while a test runs; expiry is moved in the table."""


@pytest.fixture
async def stores(database_url: str) -> AsyncIterator[tuple[Store, Store]]:
    a = Store.from_url(database_url)
    b = Store.from_url(database_url)
    await a.migrate()
    await b.migrate()
    yield a, b
    await a.aclose()
    await b.aclose()


async def _rows(store: Store) -> list[tuple[str, ...]]:
    async with store._db.read() as tx:
        result = await tx.execute(text("SELECT hash, key_id, name, owner, role FROM ws_tickets"))
        return [tuple(str(v) for v in row) for row in result.all()]


async def test_a_ticket_from_one_replica_opens_on_another_once(stores: tuple[Store, Store]) -> None:
    a, b = (SharedTickets(s.ws_tickets, TTL) for s in stores)
    ticket = await a.issue(ALICE)
    assert ticket.startswith("wst_")
    assert await b.redeem(ticket) == ALICE
    assert await b.redeem(ticket) is None  # used
    assert await a.redeem(ticket) is None  # used, on the issuing replica too
    assert await a.redeem("wst_unknown") is None
    assert await a.redeem("") is None


async def test_the_table_holds_a_digest_never_the_ticket(stores: tuple[Store, Store]) -> None:
    tickets = SharedTickets(stores[0].ws_tickets, TTL)
    ticket = await tickets.issue(ALICE)
    rows = await _rows(stores[1])
    assert rows == [(ticket_digest(ticket), "key-alice", "alice's key", "alice", "user")]
    assert all(ticket not in value and ticket.removeprefix("wst_") not in value for value in rows[0])
    assert await tickets.redeem(rows[0][0]) is None  # the digest from a dump is no ticket
    assert await tickets.redeem(ticket) == ALICE
    assert await _rows(stores[1]) == []


async def test_concurrent_redeems_on_two_replicas_one_wins(stores: tuple[Store, Store]) -> None:
    a, b = (SharedTickets(s.ws_tickets, TTL) for s in stores)
    for _ in range(3):
        ticket = await a.issue(ALICE)
        won: list[Principal | None] = []

        async def redeem(
            tickets: SharedTickets, ticket: str = ticket, won: list[Principal | None] = won
        ) -> None:
            won.append(await tickets.redeem(ticket))

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(redeem, (a, b)[i % 2])
        assert won.count(ALICE) == 1
        assert won.count(None) == 7


async def test_an_expired_ticket_fails_and_is_pruned_on_the_next_issue(stores: tuple[Store, Store]) -> None:
    a, b = (SharedTickets(s.ws_tickets, TTL) for s in stores)
    old = await a.issue(ALICE)
    async with stores[0]._db.write() as tx:  # its time passes, by the database's clock
        await tx.execute(text("UPDATE ws_tickets SET expires_at = now() - interval '1 second'"))
    assert await b.redeem(old) is None
    assert len(await _rows(stores[0])) == 1  # a failed redeem deletes nothing
    fresh = await b.issue(ALICE)
    assert [row[0] for row in await _rows(stores[0])] == [ticket_digest(fresh)]  # the expired row is gone
    assert await a.redeem(fresh) == ALICE
