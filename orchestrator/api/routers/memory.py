"""Memory: the caller's `user` memory (`/v1/memory/...`; an admin may add `?owner=`) and the
`session` memory of its own sessions (`/v1/sessions/{session_id}/memory/...`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from orchestrator.api.dependencies import CallerDep, StateDep
from orchestrator.api.limits import SESSION_ID
from orchestrator.api.memories import Memories, MemoryScopeRef, MemoryWrite
from orchestrator.store import MemoryEntry

router = APIRouter(tags=["memory"])
Key = Annotated[str, Path(min_length=1, max_length=500)]


def _memories(state: StateDep) -> Memories:
    return state.memories


MemoriesDep = Annotated[Memories, Depends(_memories)]


async def _user(principal: CallerDep, memories: MemoriesDep, owner: str | None = None) -> MemoryScopeRef:
    return await memories.user_scope(principal, owner)


async def _session(
    session_id: Annotated[str, Path(pattern=SESSION_ID)], principal: CallerDep, memories: MemoriesDep
) -> MemoryScopeRef:
    return await memories.session_scope(principal, session_id)


UserScope = Annotated[MemoryScopeRef, Depends(_user)]
SessionScope = Annotated[MemoryScopeRef, Depends(_session)]


@router.get("/v1/memory", response_model=list[str])
async def user_keys(ref: UserScope, memories: MemoriesDep, prefix: str = "") -> list[str]:
    return await memories.keys(ref, prefix)


@router.get("/v1/memory/{key}", response_model=MemoryEntry)
async def get_user_key(key: Key, ref: UserScope, memories: MemoriesDep) -> MemoryEntry:
    return await memories.get(ref, key)


@router.put("/v1/memory/{key}", response_model=MemoryEntry)
async def put_user_key(key: Key, body: MemoryWrite, ref: UserScope, memories: MemoriesDep) -> MemoryEntry:
    return await memories.put(ref, key, body)


@router.delete("/v1/memory/{key}", status_code=204)
async def delete_user_key(key: Key, ref: UserScope, memories: MemoriesDep) -> None:
    await memories.delete(ref, key)


@router.get("/v1/sessions/{session_id}/memory", response_model=list[str])
async def session_keys(ref: SessionScope, memories: MemoriesDep, prefix: str = "") -> list[str]:
    return await memories.keys(ref, prefix)


@router.get("/v1/sessions/{session_id}/memory/{key}", response_model=MemoryEntry)
async def get_session_key(key: Key, ref: SessionScope, memories: MemoriesDep) -> MemoryEntry:
    return await memories.get(ref, key)


@router.put("/v1/sessions/{session_id}/memory/{key}", response_model=MemoryEntry)
async def put_session_key(
    key: Key, body: MemoryWrite, ref: SessionScope, memories: MemoriesDep
) -> MemoryEntry:
    return await memories.put(ref, key, body)


@router.delete("/v1/sessions/{session_id}/memory/{key}", status_code=204)
async def delete_session_key(key: Key, ref: SessionScope, memories: MemoriesDep) -> None:
    await memories.delete(ref, key)
