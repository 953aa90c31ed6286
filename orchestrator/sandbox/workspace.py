"""Workspaces: where an assistant's files live, who shares them, and the rules paths into them follow.

Scope (docs/api.md, "Workspaces"): by default a workspace belongs to one owner *and* one assistant
(`session` assistants: one owner, assistant and session). A request's `workspace_id` is the deliberate
way to share one workspace between an owner's assistants and sessions; it is still scoped by owner, so
two owners naming the same `workspace_id` get two volumes. A workspace is a named volume
`cage-ws-<hint>-<digest>` (digest of the scope, `identity.identity_key`) owned by the `sandbox`
user (uid 1000), so it survives container recreation and works when the orchestrator itself runs
in a container. CI mode bind-mounts a host directory instead (its ownership is left alone).

Volumes made by earlier versions were named `cage-ws-<owner>-<workspace>`, an ambiguous
concatenation. `legacy_volume_name` finds the one that provably belongs to a scope (neither id has
a `-`); the manager copies it into the new volume on first use and leaves it in place.

Paths given by sandbox.yao (`file.path`, `copy.dst`) are relative to the workspace root (`~/` means
the root). They may not be absolute or contain `..`; files are written by the unprivileged sandbox
user without following symlinks in existing directories (`DockerBackend.put_files`), and a symlink
pointing out of the workspace is refused with a clear error first (`ensure_inside`).
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from orchestrator.dsl.sandbox import Lifecycle
from orchestrator.errors import WorkspaceError
from orchestrator.sandbox.backend import BindMount, ExecSpec, Mount, SandboxBackend, SandboxRef, VolumeMount
from orchestrator.sandbox.identity import (
    DEFAULT_WORKSPACE,
    SandboxIdentity,
    container_name,
    digest_name,
    identity_key,
)
from orchestrator.sandbox.labels import ASSISTANT, OWNER, SESSION, VOLUME, WORKSPACE
from orchestrator.sandbox.limits import SANDBOX_GID, SANDBOX_UID, SANDBOX_USER


class WorkspaceScope(BaseModel):
    """Who a workspace volume belongs to; its labels say the same in readable form."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    owner: str
    workspace_id: str
    assistant_id: str | None = None
    """Set for a default workspace (one assistant's); None for a shared `workspace_id`."""
    session_id: str | None = None
    """Set for a `session` assistant's default workspace."""

    @property
    def volume_name(self) -> str:
        if self.assistant_id is None:
            key = identity_key("workspace", self.owner, self.workspace_id)
            hint = f"{self.owner}-{self.workspace_id}"
        elif self.session_id is None:
            key = identity_key("assistant-workspace", self.owner, self.assistant_id)
            hint = f"{self.owner}-{self.assistant_id}"
        else:
            key = identity_key("session-workspace", self.owner, self.assistant_id, self.session_id)
            hint = f"{self.owner}-{self.assistant_id}"
        return digest_name("cage-ws", hint, key)

    def labels(self) -> dict[str, str]:
        """`cage.*` labels of the volume (ids only, never a secret)."""
        labels = {VOLUME: "workspace", OWNER: self.owner, WORKSPACE: self.workspace_id}
        if self.assistant_id is not None:
            labels[ASSISTANT] = self.assistant_id
        if self.session_id is not None:
            labels[SESSION] = self.session_id
        return labels


def workspace_scope(identity: SandboxIdentity) -> WorkspaceScope:
    """The workspace a sandbox identity mounts (see the module docstring)."""
    if identity.shared_workspace:
        return WorkspaceScope(owner=identity.owner, workspace_id=identity.workspace_id)
    session = identity.session_id if identity.lifecycle is Lifecycle.SESSION else None
    return WorkspaceScope(
        owner=identity.owner,
        workspace_id=DEFAULT_WORKSPACE,
        assistant_id=identity.assistant_id,
        session_id=session,
    )


def volume_name(identity: SandboxIdentity) -> str:
    return workspace_scope(identity).volume_name


def legacy_volume_name(scope: WorkspaceScope) -> str | None:
    """The pre-digest volume this scope inherits, when that name could only have been this owner's.

    Old names were `cage-ws-<owner>-<workspace>` for every assistant of the owner. The name is
    attributed only when neither id contains `-` (then the split is unique) and it was not
    shortened; session workspaces inherit nothing (one copy per session would multiply the disk).
    """
    if scope.session_id is not None or "-" in scope.owner or "-" in scope.workspace_id:
        return None
    raw = f"cage-ws-{scope.owner}-{scope.workspace_id}"
    return raw if container_name(raw) == raw else None


def workspace_mount(*, volume: str, mount_path: str, read_only: bool, host_path: Path | None) -> Mount:
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
        source=volume,
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
