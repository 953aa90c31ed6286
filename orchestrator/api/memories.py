"""Assistant memory over the API, scoped to the caller: its owner's `user` memory and the `session`
memory of its own sessions. Someone else's scope looks absent (404)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from orchestrator.api.auth import Principal
from orchestrator.api.sessions import SessionService
from orchestrator.errors import NotFound
from orchestrator.store import MemoryEntry, MemorySpace, Store


class MemoryWrite(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    value: JsonValue
    ttl_seconds: float | None = Field(default=None, gt=0, le=10 * 365 * 86400)
    """Expire the entry after this long (at most ten years); none means never."""


class MemoryScopeRef(BaseModel):
    """Which memory a request addresses, after the ownership check."""

    model_config = ConfigDict(frozen=True)
    space: MemorySpace
    scope_id: str
    shown_id: str = ""
    """The scope as the caller names it, when that differs (a session's client id): entries show it."""

    def shown(self, entry: MemoryEntry) -> MemoryEntry:
        return entry.model_copy(update={"scope_id": self.shown_id}) if self.shown_id else entry


class Memories:
    def __init__(self, store: Store, sessions: SessionService) -> None:
        self._store = store
        self._sessions = sessions

    async def user_scope(self, principal: Principal, owner: str | None) -> MemoryScopeRef:
        """The caller's own user memory; an admin may name another owner."""
        target = owner if owner and principal.is_admin else principal.owner
        return MemoryScopeRef(space="user", scope_id=target)

    async def session_scope(self, principal: Principal, session_id: str) -> MemoryScopeRef:
        """Raises: NotFound (no such session, or another owner's)."""
        session = await self._sessions.get(principal, session_id)
        # the turns' session memory is keyed by the internal id; entries show the caller's id
        return MemoryScopeRef(space="chat", scope_id=session.id, shown_id=session.client_id)

    async def keys(self, ref: MemoryScopeRef, prefix: str) -> list[str]:
        return await self._store.memory.keys(ref.space, ref.scope_id, prefix=prefix)

    async def get(self, ref: MemoryScopeRef, key: str) -> MemoryEntry:
        """Raises: NotFound (absent or expired)."""
        entry = await self._store.memory.entry(ref.space, ref.scope_id, key)
        if entry is None:
            raise NotFound(f"memory key {key!r} not found")
        return ref.shown(entry)

    async def put(self, ref: MemoryScopeRef, key: str, body: MemoryWrite) -> MemoryEntry:
        return ref.shown(
            await self._store.memory.set(ref.space, ref.scope_id, key, body.value, ttl=body.ttl_seconds)
        )

    async def delete(self, ref: MemoryScopeRef, key: str) -> None:
        """Raises: NotFound."""
        if not await self._store.memory.delete(ref.space, ref.scope_id, key):
            raise NotFound(f"memory key {key!r} not found")
