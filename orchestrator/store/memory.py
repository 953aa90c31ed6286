"""Assistant memory: a JSON key-value store in four spaces (Yao's `user`, `team`, `chat`,
`context`), each split by a scope id, with optional expiry.

A scope can only see its own keys: `ctx.memory.user` of Alice is `memory.scope("user", "alice")`, and
nothing there reaches Bob's. An expired entry reads as absent at once; `purge_expired()` (run by the
reaper) deletes expired rows for good.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import get_args

from pydantic import JsonValue
from sqlalchemy import ColumnElement, delete, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from orchestrator.errors import CageError, CapacityError, UsageError
from orchestrator.store.database import Database, affected
from orchestrator.store.records import MemoryEntry, MemorySpace
from orchestrator.store.tables import MemoryRow
from orchestrator.store.upsert import upsert

SPACES: tuple[str, ...] = get_args(MemorySpace)
MAX_VALUE_BYTES = 1 * 2**20
"""Largest value (as compact JSON) one memory key holds."""
MAX_KEYS_PER_SCOPE = 10_000
"""Live keys one scope (a user's, a team's, a session's memory) holds at most."""
MAX_KEY_LENGTH = 500


def _record(row: MemoryRow) -> MemoryEntry:
    return MemoryEntry(
        space=row.space,
        scope_id=row.scope_id,
        key=row.key,
        value=row.value,
        expires_at=row.expires_at,
        updated_at=row.updated_at,
    )


def _check(space: str, scope_id: str, key: str | None = None) -> None:
    if space not in SPACES:
        raise UsageError(f"unknown memory space {space!r}; expected one of {', '.join(SPACES)}")
    if not scope_id:
        raise UsageError(f"memory space {space!r} needs a scope id")
    if key is not None and not 0 < len(key) <= MAX_KEY_LENGTH:
        raise UsageError(f"memory keys are 1 to {MAX_KEY_LENGTH} characters long")


class MemoryFull(CapacityError):
    """A memory scope holds `MAX_KEYS_PER_SCOPE` keys already (429)."""

    code = "memory_full"

    def __init__(self, space: str, limit: int) -> None:
        self.scope = f"{space} memory"
        self.limit = limit
        CageError.__init__(
            self, f"{space} memory is full: at most {limit} keys; delete some or let them expire"
        )


class MemoryRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    def scope(self, space: MemorySpace, scope_id: str) -> MemoryScope:
        """The memory of one scope, e.g. `scope("user", owner)`.

        Raises:
            UsageError: unknown space or empty scope id.
        """
        _check(space, scope_id)
        return MemoryScope(self, space, scope_id)

    def _live(self, now: datetime) -> ColumnElement[bool]:
        return or_(MemoryRow.expires_at.is_(None), MemoryRow.expires_at > now)

    async def entry(self, space: MemorySpace, scope_id: str, key: str) -> MemoryEntry | None:
        """The live entry; None when absent or expired."""
        _check(space, scope_id, key)
        query = select(MemoryRow).where(
            MemoryRow.space == space,
            MemoryRow.scope_id == scope_id,
            MemoryRow.key == key,
            self._live(self._db.clock()),
        )
        async with self._db.read() as tx:
            row = await tx.scalar(query)
            return None if row is None else _record(row)

    async def get(self, space: MemorySpace, scope_id: str, key: str, default: JsonValue = None) -> JsonValue:
        found = await self.entry(space, scope_id, key)
        return default if found is None else found.value

    async def set(
        self,
        space: MemorySpace,
        scope_id: str,
        key: str,
        value: JsonValue,
        *,
        ttl: timedelta | float | None = None,
    ) -> MemoryEntry:
        """Store `value` under `key`; with `ttl` (seconds or a timedelta) it expires after that long.

        Raises:
            UsageError: bad space, scope or key, or a ttl that is not positive.
        """
        _check(space, scope_id, key)
        size = len(json.dumps(value, separators=(",", ":")).encode())
        if size > MAX_VALUE_BYTES:
            raise UsageError(f"memory value is {size} bytes; the limit is {MAX_VALUE_BYTES} bytes")
        now = self._db.clock()
        expires_at: datetime | None = None
        if ttl is not None:
            delta = ttl if isinstance(ttl, timedelta) else timedelta(seconds=ttl)
            if delta <= timedelta(0):
                raise UsageError(f"memory ttl must be positive, got {delta.total_seconds()} s")
            expires_at = now + delta
        values = {
            "space": space,
            "scope_id": scope_id,
            "key": key,
            "value": value,
            "expires_at": expires_at,
            "updated_at": now,
        }
        async with self._db.write() as tx:
            await self._room_for(tx, space, scope_id, key, now)
            await upsert(tx, MemoryRow, values, keys=("space", "scope_id", "key"))
        return MemoryEntry(
            space=space, scope_id=scope_id, key=key, value=value, expires_at=expires_at, updated_at=now
        )

    async def _room_for(
        self, tx: AsyncSession, space: MemorySpace, scope_id: str, key: str, now: datetime
    ) -> None:
        """Raises CapacityError when a new key would pass `MAX_KEYS_PER_SCOPE` (expired entries,
        which no read sees any more, are dropped first)."""
        in_scope = (MemoryRow.space == space, MemoryRow.scope_id == scope_id)
        if await tx.get(MemoryRow, (space, scope_id, key)) is not None:
            return
        count = await tx.scalar(select(func.count()).select_from(MemoryRow).where(*in_scope))
        if (count or 0) < MAX_KEYS_PER_SCOPE:
            return
        await tx.execute(delete(MemoryRow).where(*in_scope, MemoryRow.expires_at <= now))
        count = await tx.scalar(select(func.count()).select_from(MemoryRow).where(*in_scope))
        if (count or 0) >= MAX_KEYS_PER_SCOPE:
            raise MemoryFull(space, MAX_KEYS_PER_SCOPE)

    async def has(self, space: MemorySpace, scope_id: str, key: str) -> bool:
        return await self.entry(space, scope_id, key) is not None

    async def delete(self, space: MemorySpace, scope_id: str, key: str) -> bool:
        """False when there was no live entry."""
        _check(space, scope_id, key)
        stmt = delete(MemoryRow).where(
            MemoryRow.space == space,
            MemoryRow.scope_id == scope_id,
            MemoryRow.key == key,
            self._live(self._db.clock()),
        )
        async with self._db.write() as tx:
            result = await tx.execute(stmt)
            return bool(affected(result))

    async def keys(self, space: MemorySpace, scope_id: str, *, prefix: str = "") -> list[str]:
        """The scope's live keys, sorted; only those starting with `prefix` when given."""
        _check(space, scope_id)
        query = select(MemoryRow.key).where(
            MemoryRow.space == space, MemoryRow.scope_id == scope_id, self._live(self._db.clock())
        )
        async with self._db.read() as tx:
            found = list(await tx.scalars(query))
        # Filtered here rather than with LIKE, so `%` and `_` in a prefix need no escaping.
        return sorted(k for k in found if k.startswith(prefix))

    async def clear(self, space: MemorySpace, scope_id: str) -> int:
        """Delete every key of the scope; returns how many rows went."""
        _check(space, scope_id)
        return await self._db.delete(
            delete(MemoryRow).where(MemoryRow.space == space, MemoryRow.scope_id == scope_id)
        )

    async def purge_expired(self) -> int:
        """Delete expired entries in every space; returns how many went."""
        return await self._db.delete(delete(MemoryRow).where(MemoryRow.expires_at <= self._db.clock()))


class MemoryScope:
    """One scope's memory (`ctx.memory.user` and friends): the repository with space and id bound."""

    def __init__(self, repo: MemoryRepository, space: MemorySpace, scope_id: str) -> None:
        self._repo = repo
        self.space: MemorySpace = space
        self.scope_id = scope_id

    async def get(self, key: str, default: JsonValue = None) -> JsonValue:
        return await self._repo.get(self.space, self.scope_id, key, default)

    async def set(self, key: str, value: JsonValue, *, ttl: timedelta | float | None = None) -> MemoryEntry:
        return await self._repo.set(self.space, self.scope_id, key, value, ttl=ttl)

    async def has(self, key: str) -> bool:
        return await self._repo.has(self.space, self.scope_id, key)

    async def delete(self, key: str) -> bool:
        return await self._repo.delete(self.space, self.scope_id, key)

    async def keys(self, *, prefix: str = "") -> list[str]:
        return await self._repo.keys(self.space, self.scope_id, prefix=prefix)

    async def clear(self) -> int:
        return await self._repo.clear(self.space, self.scope_id)
