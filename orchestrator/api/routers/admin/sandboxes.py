"""Admin: every sandbox, with exec, stop, remove and an on-demand reaper sweep."""

from __future__ import annotations

from fastapi import APIRouter, Request

from orchestrator.api.dependencies import AdminDep, FleetDep
from orchestrator.api.fleet import ExecRequest, ExecResult, ReapedSandbox, SandboxView
from orchestrator.sandbox.reconcile import ReconcileReport, UnclaimedSandbox

router = APIRouter(prefix="/v1/admin/sandboxes", tags=["admin"])


@router.get("", response_model=list[SandboxView])
async def list_sandboxes(
    principal: AdminDep, fleet: FleetDep, owner: str | None = None, usage: bool = False
) -> list[SandboxView]:
    return await fleet.views(principal, owner=owner, usage=usage)


@router.get("/unclaimed", response_model=list[UnclaimedSandbox])
async def unclaimed_sandboxes(principal: AdminDep, request: Request) -> list[UnclaimedSandbox]:
    """Boxes the last start neither adopted nor removed (their assistant was unknown, or could not
    be listed); fix the app directory and restart to adopt them, or remove them with the engine."""
    report: ReconcileReport = getattr(request.app.state, "reconcile", ReconcileReport())
    return list(report.unclaimed)


@router.post("/gc", response_model=list[ReapedSandbox])
async def gc_sandboxes(principal: AdminDep, fleet: FleetDep) -> list[ReapedSandbox]:
    return await fleet.gc(principal)


@router.get("/{name}", response_model=SandboxView)
async def get_sandbox(name: str, principal: AdminDep, fleet: FleetDep) -> SandboxView:
    return await fleet.get(principal, name)


@router.post("/{name}/exec", response_model=ExecResult)
async def exec_in_sandbox(name: str, body: ExecRequest, principal: AdminDep, fleet: FleetDep) -> ExecResult:
    return await fleet.exec(principal, name, body)


@router.post("/{name}/stop", response_model=SandboxView)
async def stop_sandbox(name: str, principal: AdminDep, fleet: FleetDep) -> SandboxView:
    return await fleet.stop(principal, name)


@router.delete("/{name}", status_code=204)
async def delete_sandbox(name: str, principal: AdminDep, fleet: FleetDep) -> None:
    await fleet.remove(principal, name)
