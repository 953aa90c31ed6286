"""The sandbox backend contract: a Protocol and the frozen models that cross it.

Nothing here knows Docker. A `SandboxRef` is a container for the Docker backend and would be a
pod for a Kubernetes one; labels are labels; a workspace volume is a named volume or a PVC.
The manager (`orchestrator.sandbox.manager`) speaks only this interface (STYLE R2, R13).
"""

from __future__ import annotations

import enum
import re
import signal
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from types import TracebackType
from typing import Literal, Protocol, Self, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.attribute_docs import describe_fields
from orchestrator.errors import StreamLimitError
from orchestrator.sandbox.network import EgressPolicy

_FROZEN = ConfigDict(extra="forbid", frozen=True, json_schema_extra=describe_fields)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SandboxState(enum.StrEnum):
    """Engine-neutral state of a sandbox."""

    CREATED = "created"
    RUNNING = "running"
    PAUSED = "paused"
    RESTARTING = "restarting"
    STOPPED = "stopped"
    REMOVING = "removing"
    DEAD = "dead"


class SandboxRef(BaseModel):
    """A handle on one sandbox: the engine id, its name and its labels at lookup time."""

    model_config = _FROZEN
    id: str
    """Engine id (a container id for Docker, a pod uid for Kubernetes)."""
    name: str
    """Unique, human-readable name (the Cage identity)."""
    labels: Mapping[str, str] = Field(default_factory=dict)
    status: SandboxState = SandboxState.CREATED


class ResourceUsage(BaseModel):
    model_config = _FROZEN
    memory_bytes: int | None = None
    pids: int | None = None


class SandboxInfo(BaseModel):
    """What `inspect` returns: state, labels, times and cheap resource figures."""

    model_config = _FROZEN
    ref: SandboxRef
    image: str
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    usage: ResourceUsage = ResourceUsage()
    user: str = ""
    """The configured main user (execs run as the user given in their `ExecSpec`)."""


class VolumeMount(BaseModel):
    """A named engine volume (Docker volume, Kubernetes PVC) mounted at `target`."""

    model_config = _FROZEN
    kind: Literal["volume"] = "volume"
    source: str
    target: str
    read_only: bool = False
    owner: tuple[int, int] | None = None
    """uid, gid the backend gives the mount's root before the sandbox starts (fsGroup on Kubernetes)."""


class BindMount(BaseModel):
    """A host directory mounted at `target` (CI mode: the checkout)."""

    model_config = _FROZEN
    kind: Literal["bind"] = "bind"
    source: str
    """Absolute host path."""
    target: str
    read_only: bool = False

    @field_validator("source")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f"bind source must be an absolute host path, got {v!r}")
        return v


Mount = VolumeMount | BindMount


class ResourceLimits(BaseModel):
    model_config = _FROZEN
    memory_bytes: int | None = Field(default=None, gt=0)
    nano_cpus: int | None = Field(default=None, gt=0)
    """CPU quota in 1e-9 cores (`--cpus 1.5` is 1_500_000_000)."""
    pids: int | None = Field(default=None, gt=0)
    disk_bytes: int | None = Field(default=None, gt=0)
    """Writable-layer size; applied only where the storage driver enforces it (`disk_limit_supported`)."""


class VolumeInfo(BaseModel):
    """A workspace volume as `list_volumes` sees it."""

    model_config = _FROZEN
    name: str
    labels: Mapping[str, str] = Field(default_factory=dict)
    created_at: datetime | None = None


class ProcessInfo(BaseModel):
    """One process inside a sandbox, as seen from its own pid namespace."""

    model_config = _FROZEN
    pid: int
    ppid: int
    pgid: int = 0
    start: int
    """Start time in clock ticks since boot: with `pid`, a key no later process can reuse."""
    exe: str = ""
    """Path of its executable (empty when the lister may not read it); a process cannot fake it."""
    argv: tuple[str, ...] = ()
    """The first words of its command line (a process can rewrite it)."""


class PortBinding(BaseModel):
    """A container port published on the host's loopback only."""

    model_config = _FROZEN
    container_port: int = Field(ge=1, le=65535)
    host_port: int = Field(default=0, ge=0, le=65535)
    """0 lets the engine pick a free port."""
    protocol: Literal["tcp", "udp"] = "tcp"


class CreateSpec(BaseModel):
    """Everything needed to create one sandbox. Values must already be resolved (no `$ENV.`)."""

    model_config = _FROZEN
    image: str
    name: str
    command: tuple[str, ...] = ()
    """Main process; empty means the image default."""
    labels: Mapping[str, str] = Field(default_factory=dict)
    env: Mapping[str, str] = Field(default_factory=dict)
    user: str = ""
    """User of the main process; empty means the image default."""
    workdir: str = ""
    mounts: tuple[Mount, ...] = ()
    limits: ResourceLimits = ResourceLimits()
    cap_drop: tuple[str, ...] = ()
    cap_add: tuple[str, ...] = ()
    security_opt: tuple[str, ...] = ()
    init: bool = True
    """Run an init process as PID 1 that reaps orphans (a replaced CLI server must not stay a zombie)."""
    read_only: bool = False
    tmpfs: Mapping[str, str] = Field(default_factory=dict)
    """Mount point -> mount options (`{"/tmp": "rw,nosuid,size=256m"}`)."""
    network: Literal["none", "bridge"] = "bridge"
    runtime: str | None = None
    extra_hosts: Mapping[str, str] = Field(default_factory=dict)
    """Host name -> address; `host-gateway` means the engine's host."""
    ports: tuple[PortBinding, ...] = ()
    egress: EgressPolicy | None = None
    """Isolated: a network of its own whose only way out is the egress proxy (`network` is ignored)."""
    gateway_relay: str | None = None
    """`host:port` the proxy's `cage-gateway` relay forwards to (the model gateway), when isolated."""
    stop_timeout: int | None = None
    """Seconds between SIGTERM and SIGKILL when the engine stops the box (`stop_timeout`); None:
    the engine's default."""

    @field_validator("env")
    @classmethod
    def _env(cls, env: Mapping[str, str]) -> Mapping[str, str]:
        bad = [k for k in env if not _ENV_NAME.fullmatch(k)]
        if bad:
            raise ValueError(f"invalid environment variable name(s): {', '.join(sorted(bad))}")
        return env


class FileEntry(BaseModel):
    """One file for `put_files`, relative to the destination directory."""

    model_config = _FROZEN
    path: str = Field(min_length=1)
    content: bytes
    mode: int = Field(default=0o644, ge=0, le=0o7777)
    uid: int = Field(default=1000, ge=0)
    """Owner of the file, and the uid that writes it (the sandbox's user: see `put_files`)."""
    gid: int = Field(default=1000, ge=0)


class ExecSpec(BaseModel):
    """One process to run inside a sandbox."""

    model_config = _FROZEN
    argv: tuple[str, ...] = Field(min_length=1)
    env: Mapping[str, str] = Field(default_factory=dict)
    user: str = ""
    """Empty means the sandbox's main user."""
    workdir: str = ""
    stdin: bytes | Literal["pipe"] | None = None
    """None: `/dev/null`; bytes: written, then closed; "pipe": open until `close_stdin()`."""
    grace_seconds: float = Field(default=2.0, ge=0)
    """On `aclose()` of a process still running: time between SIGTERM and SIGKILL."""
    files: tuple[FileEntry, ...] = ()
    """Written below `files_dir` before `argv` starts, under `put_files`' rules (as the files' one
    owner, never through a symlink); when they cannot be, the exec fails with `SandboxError`
    before anything of `argv` ran. A backend may write them in the process that then becomes
    `argv` (Docker does: one exec, not two)."""
    files_dir: str = ""
    """The absolute directory `files` are relative to."""

    @model_validator(mode="after")
    def _files_dir(self) -> ExecSpec:
        if self.files and not self.files_dir.startswith("/"):
            raise ValueError("files need an absolute files_dir")
        return self


ExecItem = bytes | StreamLimitError
"""What an exec handle yields: one stdout line (without its newline) or a too-long-line marker."""


@runtime_checkable
class ExecHandle(Protocol):
    """A running process in a sandbox. Iterate it for stdout lines; close it with `aclose()`.

    `aclose()` is idempotent and time-bounded: a process still running gets SIGTERM on its
    process group, then SIGKILL after the grace period.
    """

    def __aiter__(self) -> AsyncIterator[ExecItem]: ...

    @property
    def stderr(self) -> bytes:
        """The captured stderr: its head and its tail when it was longer than the cap."""
        ...

    async def write_stdin(self, data: bytes) -> None: ...

    async def close_stdin(self) -> None: ...

    async def signal(self, sig: signal.Signals) -> None:
        """Deliver `sig` to the exec'd process group."""
        ...

    async def wait(self) -> int:
        """Drain stdout and return the exit code."""
        ...

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


async def feed_stdin(handle: ExecHandle, stdin: bytes | Literal["pipe"] | None) -> None:
    """What `ExecSpec.stdin` asks of a started exec: bytes written, then stdin closed; None,
    closed at once; "pipe", left open for the caller."""
    if isinstance(stdin, bytes):
        if stdin:
            await handle.write_stdin(stdin)
        await handle.close_stdin()
    elif stdin is None:
        await handle.close_stdin()


@runtime_checkable
class BatchedExec(Protocol):
    """An `ExecHandle` that can also hand out its stdout as the batches it read (one engine read
    each, in order, never empty), for a reader whose cost per item is worth paying once per read
    (the runner bridge). A handle is iterated once: either by item or by batch."""

    def batches(self) -> AsyncIterator[Sequence[ExecItem]]: ...


ClusterLock = Callable[[str], AbstractAsyncContextManager[None]]
"""A lock on a key that every replica sharing the database waits for (`LeaseRepository.hold`)."""


@runtime_checkable
class FleetStateBackend(Protocol):
    """A backend keeping engine state that every replica writes (the Kubernetes egress proxies'
    configuration): the manager hands it the fleet's lock when replicas share the database."""

    def use_cluster_lock(self, lock: ClusterLock) -> None: ...


class SandboxBackend(Protocol):
    """A container engine seen from Cage. Implementations translate engine errors into
    `SandboxNotFound`, `SandboxError` and `EngineUnavailable`."""

    async def ping(self) -> None:
        """Raises `EngineUnavailable` when the engine does not answer."""
        ...

    async def aclose(self) -> None:
        """Close the engine client (idempotent); the sandboxes stay as they are."""
        ...

    async def find(self, labels: Mapping[str, str]) -> list[SandboxRef]:
        """Every sandbox (running or not) carrying all of `labels`."""
        ...

    async def inspect(self, sandbox_id: str) -> SandboxInfo: ...

    async def create(self, spec: CreateSpec) -> SandboxRef: ...

    async def start(self, ref: SandboxRef) -> None: ...

    async def stop(self, ref: SandboxRef, *, timeout: float = 2.0) -> None:  # noqa: ASYNC109 - engine grace
        """Stop the main process: SIGTERM, then SIGKILL after `timeout` seconds."""
        ...

    async def remove(self, ref: SandboxRef, *, force: bool = False) -> None:
        """Remove the sandbox; a sandbox already gone is not an error."""
        ...

    async def exec(self, ref: SandboxRef, spec: ExecSpec) -> ExecHandle: ...

    async def put_files(self, ref: SandboxRef, dest_dir: str, files: Sequence[FileEntry]) -> None:
        """Write `files` below `dest_dir` in a running sandbox, as the files' own (non-root) owner.

        Never through a symlink the sandbox planted: an existing symlink on a file's path (a
        parent directory or the file itself) is replaced, not followed, and the writer has no
        more rights than the agent. All entries must have the same owner.
        """
        ...

    async def get_file(self, ref: SandboxRef, path: str) -> bytes: ...

    async def ensure_volume(
        self, name: str, labels: Mapping[str, str], *, tmpfs_bytes: int | None = None
    ) -> bool:
        """Create the volume unless it exists; True when it was created now.

        `tmpfs_bytes` makes it a size-bounded memory volume (its content lives while mounted).
        """
        ...

    async def remove_volume(self, name: str) -> None: ...

    async def list_volumes(self, labels: Mapping[str, str], *, unused: bool = False) -> list[VolumeInfo]:
        """Volumes carrying all of `labels`; `unused`: only those no sandbox (in any state) mounts."""
        ...

    async def sweep_networks(self) -> list[str]:
        """Remove sandbox networks (and port relays) whose sandbox is gone; returns what was removed."""
        ...

    async def copy_volume(self, source: str, target: str, *, image: str, owner: tuple[int, int]) -> None:
        """Copy the content of volume `source` into `target`, as `owner`, in a throw-away box."""
        ...

    async def disk_limit_supported(self) -> bool:
        """Whether `ResourceLimits.disk_bytes` is enforced by this engine's storage driver."""
        ...

    async def list_processes(self, ref: SandboxRef) -> list[ProcessInfo]:
        """Every process in the running sandbox (read from inside, as the sandbox user)."""
        ...

    async def kill_processes(self, ref: SandboxRef, pids: Sequence[int], *, user: str) -> None:
        """SIGKILL `pids` inside the sandbox, as `user` (who can signal only its own processes)."""
        ...
