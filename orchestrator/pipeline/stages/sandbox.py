"""Stage 3, the sandbox: the call's box acquired before its hooks run (so they can use it), the
user's files written into it, and the box released per lifecycle when the call ends.

Every mode that has a sandbox gets it here, from the `Call` itself: runner mode and a pure-hook
assistant with a `sandbox.yao` alike.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from orchestrator.errors import ConfigError, WorkspaceError
from orchestrator.pipeline.call import Call
from orchestrator.pipeline.contract import Attachment
from orchestrator.sandbox.backend import FileEntry
from orchestrator.sandbox.images import BuildProgress
from orchestrator.sandbox.manager import ReleaseOutcome, SandboxLease, SandboxManager, SandboxRequest
from orchestrator.stream import SandboxPhase


def sandbox_request(call: Call, gateway_port: int | None = None) -> SandboxRequest:
    """The manager request for the call's sandbox.

    Raises:
        ConfigError: the assistant has no sandbox.yao.
    """
    assistant = call.assistant
    if assistant.sandbox is None:
        raise ConfigError("assistant has no sandbox.yao", file=assistant.file("sandbox.yao"))
    return SandboxRequest(
        owner=call.scope.owner,
        assistant_id=assistant.id,
        assistant_dir=assistant.path,
        spec=assistant.sandbox,
        session_id=call.scope.session_id,
        workspace_id=call.options.workspace_id,
        mcp_servers=assistant.mcp_servers,
        skills={s.name: s.digest for s in assistant.skills},
        host_workspace=call.options.host_workspace,
        gateway_port=gateway_port,
    )


async def acquire_sandbox(call: Call) -> SandboxLease:
    """Acquire the call's sandbox, reporting image builds and readiness as `sandbox/status`; the
    root call's attachments are written into it.

    Raises:
        ConfigError, SandboxError, ImageBuildError, PrepareError, CapacityError, WorkspaceError.
    """
    scope, builder, emit = call.scope, call.builder, call.emit
    request = sandbox_request(call, await _gateway_port(call))
    await emit(builder.sandbox_status("creating", f"preparing the {request.spec.runner.name} sandbox"))

    async def on_progress(progress: BuildProgress) -> None:
        if progress.phase in ("building", "step", "error"):
            phase: SandboxPhase = "failed" if progress.phase == "error" else "building"
            await emit(builder.sandbox_status(phase, progress.message or progress.tag))

    lease = await scope.manager.acquire(request, on_progress=on_progress)
    await emit(builder.sandbox_status("ready", lease.identity.name, sandbox_id=lease.identity.name))
    if scope.attachments and call.stack.kind == "root":
        try:
            await write_attachments(scope.manager, lease, scope.attachments)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await scope.manager.release(lease, release_outcome("error"))
            raise
    return lease


async def release_sandbox(call: Call, status: str) -> None:
    """Give the call's sandbox back, if it has one: kept, stopped or removed per its lifecycle."""
    if call.lease is not None:
        lease, call.lease = call.lease, None
        await call.scope.manager.release(lease, release_outcome(status))


def release_outcome(status: str) -> ReleaseOutcome:
    return {"completed": ReleaseOutcome.OK, "cancelled": ReleaseOutcome.CANCELLED}.get(
        status, ReleaseOutcome.ERROR
    )


async def write_attachments(
    manager: SandboxManager, lease: SandboxLease, attachments: Sequence[Attachment]
) -> None:
    """The user's files, into `<work dir>/attachments/`, owned by and written as the sandbox user.

    `attachments` is a member of the archive (not the extraction root), so a symlink the agent
    left in its place is replaced by a directory instead of followed (`put_files`).

    Raises:
        WorkspaceError: a name is a path, not a file name.
    """
    entries = []
    for item in attachments:
        if "/" in item.name or "\\" in item.name or item.name in (".", ".."):
            raise WorkspaceError(item.name, "attachment names are plain file names")
        entries.append(
            FileEntry(path=f"attachments/{item.name}", content=item.content, uid=lease.uid, gid=lease.gid)
        )
    await manager.backend.put_files(lease.ref, lease.work_dir, entries)


async def _gateway_port(call: Call) -> int | None:
    """The gateway's port when the box will be isolated (its relay needs it at creation), else None."""
    spec = call.assistant.sandbox
    if spec is None or not call.scope.manager.isolates(spec):
        return None
    return (await call.scope.gateway.bind()).port  # the server starts while the box is made
