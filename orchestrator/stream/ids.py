"""Where message and chunk ids come from: a Protocol, a deterministic source and a random one."""

from __future__ import annotations

import secrets
from collections import defaultdict
from typing import Protocol


class IdSource(Protocol):
    """Hands out ids unique within a session, each starting with `prefix`."""

    def next_id(self, prefix: str) -> str: ...


class CountingIds:
    """Deterministic ids `<prefix>-1`, `<prefix>-2`... with one counter per prefix (tests, goldens)."""

    def __init__(self) -> None:
        self._counters: defaultdict[str, int] = defaultdict(int)

    def next_id(self, prefix: str) -> str:
        self._counters[prefix] += 1
        return f"{prefix}-{self._counters[prefix]}"


_BATCH = 256
"""Random suffixes drawn at once: one read of the OS random source per 256 ids, not one per id
(the builder takes an id for every event: a chunk id per delta)."""


class RandomIds:
    """Ids `<prefix>-<12 hex digits>` from the OS random source; collisions are negligible.

    The suffixes are cut from one draw of random bytes at a time. Safe to share between threads:
    `list.pop` is atomic, so no suffix is handed out twice; two threads refilling at once each cut
    their own fresh draw (one of them is dropped unused).
    """

    def __init__(self) -> None:
        self._suffixes: list[str] = []

    def next_id(self, prefix: str) -> str:
        try:
            suffix = self._suffixes.pop()
        except IndexError:
            drawn = secrets.token_hex(6 * _BATCH)
            suffixes = [drawn[i : i + 12] for i in range(0, len(drawn), 12)]
            suffix = suffixes.pop()
            self._suffixes = suffixes
        return f"{prefix}-{suffix}"
