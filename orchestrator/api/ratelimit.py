"""A token bucket per key (an API key, or a client address for failed requests): `burst`
requests at once, then `per_minute` sustained.

`RateLimiter` counts in this process's memory. `SharedRateLimiter` counts in the database's
`rate_buckets` rows, so every replica on one Postgres database spends one budget per API key
(`ApiState.build` picks it on Postgres); both are `KeyLimiter`s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from orchestrator.api.errors import KeyRateLimited
from orchestrator.store.rate_buckets import RateBucketRepository

_MAX_KEYS = 100_000


class KeyLimiter(Protocol):
    async def take(self, key: str) -> None:
        """Take one request from `key`'s budget.

        Raises:
            KeyRateLimited: the budget is spent; `retry_after` is when the next request is allowed.
        """
        ...


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """Counts requests per key. One event loop uses it, so there is no lock (no await inside)."""

    def __init__(
        self,
        *,
        per_minute: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        subject: str = "this API key",
    ) -> None:
        if per_minute <= 0 or burst < 1:
            raise ValueError("per_minute must be positive and burst at least 1")
        self._rate = per_minute / 60.0
        self._burst = float(burst)
        self._clock = clock
        self._subject = subject
        self._buckets: dict[str, _Bucket] = {}

    def _refilled(self, bucket: _Bucket, now: float) -> float:
        return min(self._burst, bucket.tokens + (now - bucket.updated) * self._rate)

    def check(self, key: str) -> None:
        """Take one token for `key`.

        Raises:
            KeyRateLimited: the bucket is empty; `retry_after` is when the next token arrives.
        """
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= _MAX_KEYS:  # forget full buckets first: they carry no debt
                self._buckets = {k: b for k, b in self._buckets.items() if b.tokens < self._burst}
            bucket = self._buckets[key] = _Bucket(tokens=self._burst, updated=now)
        bucket.tokens = self._refilled(bucket, now)
        bucket.updated = now
        if bucket.tokens < 1.0:
            raise KeyRateLimited((1.0 - bucket.tokens) / self._rate, self._subject)
        bucket.tokens -= 1.0

    async def take(self, key: str) -> None:
        """`check`, as a `KeyLimiter`."""
        self.check(key)


class SharedRateLimiter:
    """The same bucket as `RateLimiter`, kept in the database: one atomic statement per request
    (`RateBucketRepository.take`), so replicas sharing the database share each key's budget."""

    def __init__(
        self, buckets: RateBucketRepository, *, per_minute: float, burst: int, subject: str = "this API key"
    ) -> None:
        if per_minute <= 0 or burst < 1:
            raise ValueError("per_minute must be positive and burst at least 1")
        self._buckets = buckets
        self._per_minute = per_minute
        self._burst = burst
        self._subject = subject

    async def take(self, key: str) -> None:
        """Take one token for `key` from its shared row.

        Raises:
            KeyRateLimited: the bucket is empty; `retry_after` is when the next token arrives.
            StoreError: the database failed.
        """
        result = await self._buckets.take("key:" + key, per_minute=self._per_minute, burst=self._burst)
        if not result.granted:
            raise KeyRateLimited((1.0 - result.tokens) * 60.0 / self._per_minute, self._subject)
