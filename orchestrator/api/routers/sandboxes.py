"""A user's own sandboxes: list, get, delete. Someone else's sandbox answers 404."""

from __future__ import annotations

from fastapi import APIRouter

from orchestrator.api.dependencies import CallerDep, SandboxesDep
from orchestrator.api.sandboxes import SandboxView

router = APIRouter(prefix="/v1/sandboxes", tags=["sandboxes"])


@router.get("", response_model=list[SandboxView])
async def list_sandboxes(
    principal: CallerDep, sandboxes: SandboxesDep, usage: bool = False
) -> list[SandboxView]:
    return await sandboxes.views(principal, owner=principal.owner, usage=usage)


@router.get("/{name}", response_model=SandboxView)
async def get_sandbox(name: str, principal: CallerDep, sandboxes: SandboxesDep) -> SandboxView:
    return await sandboxes.get(principal, name)


@router.delete("/{name}", status_code=204)
async def delete_sandbox(name: str, principal: CallerDep, sandboxes: SandboxesDep) -> None:
    await sandboxes.remove(principal, name)
