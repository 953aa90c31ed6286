"""A token bucket per key (an API key, or a client address for failed requests): `burst`
requests at once, then `per_minute` sustained."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.api.errors import KeyRateLimited

_MAX_KEYS = 100_000


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
