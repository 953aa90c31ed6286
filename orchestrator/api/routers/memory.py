"""Memory: the caller's `user` memory (`/v1/memory/...`; an admin may add `?owner=`) and the
`chat` memory of its own sessions (`/v1/sessions/{chat_id}/memory/...`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from orchestrator.api.dependencies import CallerDep, StateDep
from orchestrator.api.limits import CHAT_ID
from orchestrator.api.memories import Memories, MemoryScopeRef, MemoryWrite
from orchestrator.store import MemoryEntry

router = APIRouter(tags=["memory"])
Key = Annotated[str, Path(min_length=1, max_length=500)]


def _memories(state: StateDep) -> Memories:
    return state.memories


MemoriesDep = Annotated[Memories, Depends(_memories)]


async def _user(principal: CallerDep, memories: MemoriesDep, owner: str | None = None) -> MemoryScopeRef:
    return await memories.user_scope(principal, owner)


async def _chat(
    chat_id: Annotated[str, Path(pattern=CHAT_ID)], principal: CallerDep, memories: MemoriesDep
) -> MemoryScopeRef:
    return await memories.chat_scope(principal, chat_id)


UserScope = Annotated[MemoryScopeRef, Depends(_user)]
ChatScope = Annotated[MemoryScopeRef, Depends(_chat)]


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


@router.get("/v1/sessions/{chat_id}/memory", response_model=list[str])
async def chat_keys(ref: ChatScope, memories: MemoriesDep, prefix: str = "") -> list[str]:
    return await memories.keys(ref, prefix)


@router.get("/v1/sessions/{chat_id}/memory/{key}", response_model=MemoryEntry)
async def get_chat_key(key: Key, ref: ChatScope, memories: MemoriesDep) -> MemoryEntry:
    return await memories.get(ref, key)


@router.put("/v1/sessions/{chat_id}/memory/{key}", response_model=MemoryEntry)
async def put_chat_key(key: Key, body: MemoryWrite, ref: ChatScope, memories: MemoriesDep) -> MemoryEntry:
    return await memories.put(ref, key, body)


@router.delete("/v1/sessions/{chat_id}/memory/{key}", status_code=204)
async def delete_chat_key(key: Key, ref: ChatScope, memories: MemoriesDep) -> None:
    await memories.delete(ref, key)
