"""Admin: every sandbox, with exec, stop, remove and an on-demand reaper sweep."""

from __future__ import annotations

from fastapi import APIRouter, Request

from orchestrator.api.dependencies import AdminDep, SandboxesDep
from orchestrator.api.sandboxes import ExecRequest, ExecResult, ReapedSandbox, SandboxView
from orchestrator.sandbox.reconcile import ReconcileReport, UnclaimedSandbox

router = APIRouter(prefix="/v1/admin/sandboxes", tags=["admin"])


@router.get("", response_model=list[SandboxView])
async def list_sandboxes(
    principal: AdminDep, sandboxes: SandboxesDep, owner: str | None = None, usage: bool = False
) -> list[SandboxView]:
    return await sandboxes.views(principal, owner=owner, usage=usage)


@router.get("/unclaimed", response_model=list[UnclaimedSandbox])
async def unclaimed_sandboxes(principal: AdminDep, request: Request) -> list[UnclaimedSandbox]:
    """Boxes the last start neither adopted nor removed (their assistant was unknown, or could not
    be listed); fix the app directory and restart to adopt them, or remove them with the engine."""
    report: ReconcileReport = getattr(request.app.state, "reconcile", ReconcileReport())
    return list(report.unclaimed)


@router.post("/gc", response_model=list[ReapedSandbox])
async def gc_sandboxes(principal: AdminDep, sandboxes: SandboxesDep) -> list[ReapedSandbox]:
    return await sandboxes.gc(principal)


@router.get("/{name}", response_model=SandboxView)
async def get_sandbox(name: str, principal: AdminDep, sandboxes: SandboxesDep) -> SandboxView:
    return await sandboxes.get(principal, name)


@router.post("/{name}/exec", response_model=ExecResult)
async def exec_in_sandbox(
    name: str, body: ExecRequest, principal: AdminDep, sandboxes: SandboxesDep
) -> ExecResult:
    return await sandboxes.exec(principal, name, body)


@router.post("/{name}/stop", response_model=SandboxView)
async def stop_sandbox(name: str, principal: AdminDep, sandboxes: SandboxesDep) -> SandboxView:
    return await sandboxes.stop(principal, name)


@router.delete("/{name}", status_code=204)
async def delete_sandbox(name: str, principal: AdminDep, sandboxes: SandboxesDep) -> None:
    await sandboxes.remove(principal, name)
