"""Run sandbox.yao `prepare[]` steps in a sandbox (Yao `SB2/prepare.go` semantics, made safe).

* `file` writes content to a workspace path; `copy` pushes a file or directory from the assistant
  directory into the workspace; `exec` runs `sh -c <cmd>` in the work dir (`background` detaches it,
  `timeout` bounds it).
* `once` steps are skipped when the marker `.cage-state/prepare/<assistant>/done` in the workspace holds
  the current config hash; the marker is written after all steps succeeded.
* `ignore_error` logs the failure and goes on; otherwise a failure raises `PrepareError` with the
  step index and the head of its stderr (redacted).
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping
from pathlib import Path

import structlog
from anyio import to_thread
from pydantic import BaseModel, ConfigDict

from orchestrator.dsl.sandbox import CopyStep, ExecStep, FileStep, PrepareStep
from orchestrator.errors import PrepareError, SandboxError, SandboxNotFound, WorkspaceError
from orchestrator.redaction import redact
from orchestrator.sandbox.backend import ExecSpec, FileEntry, SandboxBackend, SandboxRef
from orchestrator.sandbox.completion import run_to_end
from orchestrator.sandbox.limits import SANDBOX_GID, SANDBOX_UID, SANDBOX_USER
from orchestrator.sandbox.workspace import ensure_inside, host_source, relative_path

log = structlog.get_logger(__name__)
STDERR_HEAD = 200
MAX_STEP_OUTPUT = 1 << 20
"""Bytes of a step's stdout kept (only a background step's pid line is read from it)."""
MAX_COPY_BYTES = 256 * 2**20
BACKGROUND_MARK = "cage-background"


def marker_path(assistant_id: str) -> str:
    return f".cage-state/prepare/{assistant_id}/done"


class PrepareContext(BaseModel):
    """Where and as whom the steps run."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    sandbox: SandboxRef
    assistant_id: str
    assistant_dir: Path | None
    """None for an assistant stored in the database: it has no files to copy."""
    config_hash: str
    mount_path: str
    work_dir: str
    env: Mapping[str, str] = {}
    grace_seconds: float = 2.0
    user: str = SANDBOX_USER
    uid: int = SANDBOX_UID
    gid: int = SANDBOX_GID
    """Who the steps run as and own the files they write (the checkout owner in CI mode)."""


class PrepareReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    ran: tuple[int, ...] = ()
    skipped: tuple[int, ...] = ()
    failed_ignored: tuple[int, ...] = ()
    background: tuple[int, ...] = ()
    """Pids (in the box) of the processes `background` steps started: kept across idle sweeps."""


async def run_prepare(
    backend: SandboxBackend, steps: tuple[PrepareStep, ...], ctx: PrepareContext
) -> PrepareReport:
    """Run `steps` in order; see the module docstring for the rules.

    Raises:
        PrepareError: a step failed and does not have `ignore_error`.
        WorkspaceError: a path escapes the workspace or the assistant directory.
    """
    if not steps:
        return PrepareReport()
    marker = marker_path(ctx.assistant_id)
    once_done = bool(ctx.config_hash) and await _read_marker(backend, ctx, marker) == ctx.config_hash
    ran: list[int] = []
    skipped: list[int] = []
    ignored: list[int] = []
    background: list[int] = []
    for index, step in enumerate(steps):
        if step.once and once_done:
            skipped.append(index)
            continue
        try:
            pid = await _run_step(backend, ctx, index, step)
            ran.append(index)
            if pid is not None:
                background.append(pid)
        except PrepareError as exc:
            if not step.ignore_error:
                raise
            log.warning("prepare step failed, ignored", sandbox=ctx.sandbox.name, step=index, error=str(exc))
            ignored.append(index)
    if ctx.config_hash and not once_done:
        entry = FileEntry(path=marker, content=ctx.config_hash.encode(), uid=ctx.uid, gid=ctx.gid)
        await backend.put_files(ctx.sandbox, ctx.mount_path, [entry])
    return PrepareReport(
        ran=tuple(ran), skipped=tuple(skipped), failed_ignored=tuple(ignored), background=tuple(background)
    )


async def _read_marker(backend: SandboxBackend, ctx: PrepareContext, marker: str) -> str:
    try:
        data = await backend.get_file(ctx.sandbox, posixpath.join(ctx.mount_path, marker))
    except SandboxNotFound:
        raise
    except SandboxError:  # no marker yet
        return ""
    return data.decode(errors="replace").strip()


async def _run_step(
    backend: SandboxBackend, ctx: PrepareContext, index: int, step: PrepareStep
) -> int | None:
    """Run one step; for a `background` exec, the pid of the process it left running."""
    if isinstance(step, FileStep):
        rel = relative_path(step.path)
        await ensure_inside(backend, ctx.sandbox, ctx.mount_path, rel)
        entry = FileEntry(
            path=rel, content=step.content.encode(), mode=step.mode, uid=SANDBOX_UID, gid=SANDBOX_GID
        )
        await _put(backend, ctx, index, [entry])
    elif isinstance(step, CopyStep):
        await _copy(backend, ctx, index, step)
    elif isinstance(step, ExecStep):
        return await _exec(backend, ctx, index, step)
    return None


async def _put(backend: SandboxBackend, ctx: PrepareContext, index: int, entries: list[FileEntry]) -> None:
    entries = [e.model_copy(update={"uid": ctx.uid, "gid": ctx.gid}) for e in entries]
    try:
        await backend.put_files(ctx.sandbox, ctx.mount_path, entries)
    except SandboxNotFound:
        raise
    except SandboxError as exc:
        raise PrepareError(
            ctx.sandbox.name, index, "cannot write files", stderr_head=str(exc)[:STDERR_HEAD]
        ) from exc


def _collect(src: Path, dst: str) -> list[FileEntry]:
    """Files under `src` (a file or a directory on the host) as entries below `dst`."""
    root = src.resolve()
    if src.is_file():
        return [
            FileEntry(
                path=dst,
                content=src.read_bytes(),
                mode=src.stat().st_mode & 0o777,
                uid=SANDBOX_UID,
                gid=SANDBOX_GID,
            )
        ]
    if not src.is_dir():
        raise WorkspaceError(str(src.name), "copy source does not exist")
    entries: list[FileEntry] = []
    total = 0
    for path in sorted(src.rglob("*")):
        resolved = path.resolve()
        if root not in resolved.parents:
            raise WorkspaceError(str(path.relative_to(src)), "symlink in copy source points outside it")
        if not resolved.is_file():
            continue
        content = resolved.read_bytes()
        total += len(content)
        if total > MAX_COPY_BYTES:
            raise WorkspaceError(str(src.name), f"copy source is larger than {MAX_COPY_BYTES} bytes")
        rel = posixpath.join(dst, path.relative_to(src).as_posix())
        entries.append(
            FileEntry(
                path=rel,
                content=content,
                mode=resolved.stat().st_mode & 0o777,
                uid=SANDBOX_UID,
                gid=SANDBOX_GID,
            )
        )
    return entries


async def _copy(backend: SandboxBackend, ctx: PrepareContext, index: int, step: CopyStep) -> None:
    if ctx.assistant_dir is None:
        raise WorkspaceError(step.src, "an assistant created over the API has no files to copy from")
    src = host_source(ctx.assistant_dir, step.src)
    dst = relative_path(step.dst)
    if step.dst.endswith("/") and await to_thread.run_sync(src.is_file):
        dst = posixpath.join(dst, src.name)
    await ensure_inside(backend, ctx.sandbox, ctx.mount_path, dst)
    entries = await to_thread.run_sync(_collect, src, dst)
    if not entries:
        return
    await _put(backend, ctx, index, entries)


async def _exec(backend: SandboxBackend, ctx: PrepareContext, index: int, step: ExecStep) -> int | None:
    command = step.cmd
    if step.background:
        command = f'nohup sh -c {shlex.quote(step.cmd)} >/dev/null 2>&1 & echo "{BACKGROUND_MARK} $!"'
    spec = ExecSpec(
        argv=("sh", "-c", command),
        user=ctx.user,
        workdir=ctx.work_dir,
        env={"HOME": ctx.work_dir, **ctx.env},
        grace_seconds=ctx.grace_seconds,
    )
    limit = step.timeout.total_seconds() if step.timeout else None
    async with await backend.exec(ctx.sandbox, spec) as handle:
        done = await run_to_end(handle, timeout=limit, max_output=MAX_STEP_OUTPUT)
    if done.timed_out:
        raise PrepareError(ctx.sandbox.name, index, f"timed out after {limit:g}s")
    if done.exit_code != 0:
        head = redact(done.stderr[: STDERR_HEAD * 4].decode(errors="replace"))[:STDERR_HEAD]
        raise PrepareError(ctx.sandbox.name, index, f"exit {done.exit_code}", stderr_head=head)
    for line in done.lines() if step.background else []:
        mark, _, pid = line.decode(errors="replace").partition(" ")
        if mark == BACKGROUND_MARK and pid.strip().isdigit():
            return int(pid)
    return None
