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


class RandomIds:
    """Ids `<prefix>-<12 hex digits>` from the OS random source; collisions are negligible."""

    def next_id(self, prefix: str) -> str:
        return f"{prefix}-{secrets.token_hex(6)}"
