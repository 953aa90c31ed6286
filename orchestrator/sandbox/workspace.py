"""Workspaces: where an assistant's files live, and the rules paths into them must follow.

By default a workspace is a named volume `cage-ws-<owner>-<workspace>` owned by the `sandbox` user
(uid 1000), so it survives container recreation and works when the orchestrator itself runs in a
container. CI mode bind-mounts a host directory instead (its ownership is left alone).

Paths given by sandbox.yao (`file.path`, `copy.dst`) are relative to the workspace root (`~/` means
the root). They may not be absolute or contain `..`; a symlink inside the workspace that points out
of it is caught by resolving the path inside the sandbox before anything is written.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping
from pathlib import Path

from orchestrator.errors import WorkspaceError
from orchestrator.sandbox.backend import BindMount, ExecSpec, Mount, SandboxBackend, SandboxRef, VolumeMount
from orchestrator.sandbox.identity import container_name
from orchestrator.sandbox.limits import SANDBOX_GID, SANDBOX_UID, SANDBOX_USER


def volume_name(owner: str, workspace_id: str) -> str:
    return container_name(f"cage-ws-{owner}-{workspace_id}")


def workspace_mount(
    *, owner: str, workspace_id: str, mount_path: str, read_only: bool, host_path: Path | None
) -> Mount:
    """A bind mount of `host_path` (CI mode) or the owner's named workspace volume.

    Raises:
        WorkspaceError: `host_path` is not an existing directory.
    """
    if host_path is not None:
        resolved = host_path.resolve()
        if not resolved.is_dir():
            raise WorkspaceError(str(host_path), "host workspace must be an existing directory")
        return BindMount(source=str(resolved), target=mount_path, read_only=read_only)
    return VolumeMount(
        source=volume_name(owner, workspace_id),
        target=mount_path,
        read_only=read_only,
        owner=(SANDBOX_UID, SANDBOX_GID),
    )


def relative_path(path: str) -> str:
    """`path` as a normalised path relative to the workspace root.

    Raises:
        WorkspaceError: absolute, empty, with `..`, or with a NUL byte.
    """
    rel = path[2:] if path.startswith("~/") else path
    if not rel or "\0" in rel or rel.startswith("/") or rel.startswith("~"):
        raise WorkspaceError(path, "must be relative to the workspace (or start with ~/)")
    if ".." in rel.split("/"):
        raise WorkspaceError(path, "must not contain '..'")
    norm = posixpath.normpath(rel)
    if norm in (".", "") or norm.startswith("../"):
        raise WorkspaceError(path, "must name something inside the workspace")
    return norm


def host_source(base: Path, src: str) -> Path:
    """`src` resolved inside the assistant directory `base` (symlinks followed on the host).

    Raises:
        WorkspaceError: `src` is absolute or resolves outside `base`.
    """
    if src.startswith("/") or "\0" in src:
        raise WorkspaceError(src, "copy source must be relative to the assistant directory")
    root = base.resolve()
    resolved = (root / src).resolve()
    if resolved != root and root not in resolved.parents:
        raise WorkspaceError(src, "copy source escapes the assistant directory")
    return resolved


_INSIDE = (
    'r=$(realpath -m -- "$2/$1") || exit 2; case "$r" in "$2"|"$2"/*) exit 0 ;; *) echo "$r"; exit 3 ;; esac'
)


async def ensure_inside(
    backend: SandboxBackend, ref: SandboxRef, root: str, rel: str, *, env: Mapping[str, str] | None = None
) -> None:
    """Refuse `rel` when, with symlinks resolved inside the sandbox, it lands outside `root`.

    Raises:
        WorkspaceError: the resolved path is outside the workspace.
    """
    spec = ExecSpec(
        argv=("sh", "-c", _INSIDE, "cage-inside", rel, root.rstrip("/") or "/"),
        user=SANDBOX_USER,
        env=dict(env or {}),
    )
    async with await backend.exec(ref, spec) as handle:
        out = [line for line in [item async for item in handle] if isinstance(line, bytes)]
        code = await handle.wait()
    if code != 0:
        where = out[0].decode(errors="replace") if out else "?"
        raise WorkspaceError(rel, f"resolves outside the workspace ({shlex.quote(where)})")
