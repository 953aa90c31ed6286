"""`rate_buckets` on real Postgres: two stores (two replicas) on one database spend one budget per key."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from sqlalchemy import text

from orchestrator.api.errors import KeyRateLimited
from orchestrator.api.ratelimit import SharedRateLimiter
from orchestrator.store import Store

pytestmark = pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)

SLOW = 0.001
"""Tokens per minute: nothing refills while a test runs, so the counts are exact."""


@pytest.fixture
async def stores(database_url: str) -> AsyncIterator[tuple[Store, Store]]:
    a = Store.from_url(database_url)
    b = Store.from_url(database_url)
    await a.migrate()
    await b.migrate()
    yield a, b
    await a.aclose()
    await b.aclose()


async def test_two_limiters_share_one_budget(stores: tuple[Store, Store]) -> None:
    a, b = (SharedRateLimiter(s.rate_buckets, per_minute=SLOW, burst=3) for s in stores)
    await a.take("k1")
    await b.take("k1")
    await a.take("k1")
    with pytest.raises(KeyRateLimited) as refused:
        await b.take("k1")
    assert refused.value.retry_after > 0
    with pytest.raises(KeyRateLimited):
        await a.take("k1")
    await b.take("k2")  # another key has its own budget


async def test_concurrent_takes_grant_exactly_the_burst(stores: tuple[Store, Store]) -> None:
    burst = 5
    granted: list[bool] = []

    async def take(store: Store) -> None:
        granted.append((await store.rate_buckets.take("key:k", per_minute=SLOW, burst=burst)).granted)

    async with anyio.create_task_group() as tg:
        for i in range(24):
            tg.start_soon(take, stores[i % 2])
    assert granted.count(True) == burst
    assert granted.count(False) == 24 - burst


async def test_a_bucket_refills_from_the_database_clock_up_to_its_burst(stores: tuple[Store, Store]) -> None:
    a, b = stores
    for _ in range(2):
        assert (await a.rate_buckets.take("key:k", per_minute=60.0, burst=2)).granted
    assert not (await b.rate_buckets.take("key:k", per_minute=60.0, burst=2)).granted
    async with a._db.write() as tx:  # one minute passes for the row: 60 tokens, capped at 2
        await tx.execute(text("UPDATE rate_buckets SET updated_at = updated_at - interval '60 seconds'"))
    first = await b.rate_buckets.take("key:k", per_minute=60.0, burst=2)
    assert first.granted
    assert first.tokens == pytest.approx(1.0, abs=0.2)
    assert (await a.rate_buckets.take("key:k", per_minute=60.0, burst=2)).granted
    assert not (await a.rate_buckets.take("key:k", per_minute=60.0, burst=2)).granted
