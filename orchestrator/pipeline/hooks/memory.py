"""`ctx.memory`: Yao's four memory spaces, each bound to the right scope for this request.

`user` is the turn's owner, `team` the owner's team (from the admin-managed membership, never from
the request; an owner in no team has a personal team space), `chat` the session, and `context` the
turn: the pipeline clears it when the turn ends.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import JsonValue

from orchestrator.pipeline.hooks.sync import dual
from orchestrator.store import MemoryScope, Store
from orchestrator.store.records import MemoryEntry


class MemoryView:
    """One space of `ctx.memory`: `get/set/delete/has/keys/clear`, with `ttl` in seconds on `set`."""

    def __init__(self, scope: MemoryScope) -> None:
        self._scope = scope
        self.written = False
        """A `set` was asked through this view (whether or not it landed)."""

    @property
    def space(self) -> str:
        return self._scope.space

    @dual
    async def get(self, key: str, default: JsonValue = None) -> JsonValue:
        return await self._scope.get(key, default)

    @dual
    async def set(self, key: str, value: JsonValue, ttl: timedelta | float | None = None) -> MemoryEntry:
        self.written = True
        return await self._scope.set(key, value, ttl=ttl)

    @dual
    async def delete(self, key: str) -> bool:
        return await self._scope.delete(key)

    @dual
    async def has(self, key: str) -> bool:
        return await self._scope.has(key)

    @dual
    async def keys(self, prefix: str = "") -> list[str]:
        return await self._scope.keys(prefix=prefix)

    @dual
    async def clear(self) -> int:
        return await self._scope.clear()


class HookMemory:
    """`ctx.memory.user`, `.team`, `.chat` (the session's) and `.context` for one request."""

    def __init__(self, store: Store, *, owner: str, team: str, session_id: str, turn_id: str) -> None:
        memory = store.memory
        self.user = MemoryView(memory.scope("user", owner))
        self.team = MemoryView(memory.scope("team", team))
        self.chat = MemoryView(memory.scope("chat", session_id))
        self.context = MemoryView(memory.scope("context", turn_id))
        self._context_scope = memory.scope("context", turn_id)

    async def end_turn(self) -> None:
        """Drop the request-scoped `context` space (the turn's hooks are its only writers, so a
        turn that wrote nothing there has nothing to drop and costs no query)."""
        if self.context.written:
            await self._context_scope.clear()
