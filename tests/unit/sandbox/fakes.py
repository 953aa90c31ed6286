"""In-memory fakes implementing the sandbox protocols (STYLE R16): real bookkeeping, no engine."""

from __future__ import annotations

import posixpath
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Self

import anyio

from orchestrator.errors import SandboxError, SandboxNotFound
from orchestrator.sandbox.backend import (
    CreateSpec,
    ExecItem,
    ExecSpec,
    FileEntry,
    ProcessInfo,
    SandboxInfo,
    SandboxRef,
    SandboxState,
    VolumeInfo,
)
from orchestrator.sandbox.images import BuildProgress, ImageInfo, ImageRef


class FakeImageBuilder:
    """Returns one fixed image for every runner; counts `ensure` calls."""

    def __init__(self, tag: str = "cage/fake:0123456789ab", image_hash: str = "ab" * 32) -> None:
        self.tag = tag
        self.image_hash = image_hash
        self.ensured = 0
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True

    async def ensure(
        self,
        runner: str,
        *,
        base: str | None = None,
        on_progress: Callable[[BuildProgress], Awaitable[None]] | None = None,
    ) -> ImageRef:
        self.ensured += 1
        return ImageRef(tag=self.tag, image_hash=self.image_hash)

    async def build(
        self,
        runner: str,
        *,
        force: bool = False,
        on_progress: Callable[[BuildProgress], Awaitable[None]] | None = None,
    ) -> ImageRef:
        return ImageRef(tag=self.tag, image_hash=self.image_hash)

    async def list_images(self) -> list[ImageInfo]:
        return []

    async def prune(self, keep_in_use: set[str]) -> list[str]:
        return []


@dataclass
class FakeResult:
    stdout: list[bytes] = field(default_factory=list)
    exit_code: int = 0
    stderr: bytes = b""
    seconds: float = 0.0


ExecScript = Callable[[SandboxRef, ExecSpec], FakeResult]


class FakeExecHandle:
    def __init__(self, result: FakeResult) -> None:
        self._result = result
        self.closed = False

    def __aiter__(self) -> AsyncIterator[ExecItem]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[ExecItem]:
        if self._result.seconds:
            await anyio.sleep(self._result.seconds)
        for line in self._result.stdout:
            yield line

    @property
    def stderr(self) -> bytes:
        return self._result.stderr

    async def write_stdin(self, data: bytes) -> None:
        return None

    async def close_stdin(self) -> None:
        return None

    async def signal(self, sig: signal.Signals) -> None:
        return None

    async def wait(self) -> int:
        async for _ in self._lines():
            pass
        return self._result.exit_code

    async def aclose(self) -> None:
        self.closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


@dataclass
class FakeBox:
    ref: SandboxRef
    spec: CreateSpec
    files: dict[str, bytes] = field(default_factory=dict)
    created_at: datetime | None = None
    """What `inspect` reports as the engine's creation time (unknown unless a test sets it)."""


class FakeBackend:
    """A SandboxBackend keeping containers, volumes and files in dicts.

    Files written to a volume mount are stored per volume, so they survive a recreated box.
    `execs` records every argv run, as a container's process table would.
    """

    def __init__(self, script: ExecScript | None = None, *, create_delay: float = 0.0) -> None:
        self.boxes: dict[str, FakeBox] = {}
        self.closed = False
        self.volumes: dict[str, dict[str, bytes]] = {}
        self.volume_labels: dict[str, dict[str, str]] = {}
        self.processes: dict[str, list[ProcessInfo]] = {}
        """Box id -> its process table (`list_processes`); `kill_processes` removes entries."""
        self.killed: list[int] = []
        self.copies: list[tuple[str, str]] = []
        self.execs: list[tuple[str, tuple[str, ...]]] = []
        self.created = 0
        self.removed: list[str] = []
        self._script = script or (lambda ref, spec: FakeResult())
        self._create_delay = create_delay
        self._next = 0

    def _box(self, ref_or_id: SandboxRef | str) -> FakeBox:
        key = ref_or_id if isinstance(ref_or_id, str) else ref_or_id.id
        box = self.boxes.get(key)
        if box is None:
            raise SandboxNotFound(key)
        return box

    def _set(self, box: FakeBox, status: SandboxState) -> None:
        box.ref = box.ref.model_copy(update={"status": status})

    async def ping(self) -> None:
        return None

    async def aclose(self) -> None:
        self.closed = True

    async def find(self, labels: Mapping[str, str]) -> list[SandboxRef]:
        return [
            b.ref for b in self.boxes.values() if all(b.ref.labels.get(k) == v for k, v in labels.items())
        ]

    async def inspect(self, sandbox_id: str) -> SandboxInfo:
        box = self._box(sandbox_id)
        return SandboxInfo(ref=box.ref, image=box.spec.image, user=box.spec.user, created_at=box.created_at)

    async def create(self, spec: CreateSpec) -> SandboxRef:
        if any(b.ref.name == spec.name for b in self.boxes.values()):
            raise SandboxError(spec.name, "name already in use")
        await anyio.sleep(self._create_delay)
        self._next += 1
        ref = SandboxRef(id=f"id{self._next:04d}", name=spec.name, labels=dict(spec.labels))
        self.boxes[ref.id] = FakeBox(ref=ref, spec=spec)
        self.created += 1
        return ref

    async def start(self, ref: SandboxRef) -> None:
        self._set(self._box(ref), SandboxState.RUNNING)

    async def stop(self, ref: SandboxRef, *, timeout: float = 2.0) -> None:  # noqa: ASYNC109 - protocol
        self._set(self._box(ref), SandboxState.STOPPED)

    async def remove(self, ref: SandboxRef, *, force: bool = False) -> None:
        if self.boxes.pop(ref.id, None) is not None:
            self.removed.append(ref.name)

    async def exec(self, ref: SandboxRef, spec: ExecSpec) -> FakeExecHandle:
        box = self._box(ref)
        if box.ref.status is not SandboxState.RUNNING:
            raise SandboxError(ref.name, "not running")
        if spec.files:
            await self.put_files(ref, spec.files_dir, spec.files)
        self.execs.append((ref.name, spec.argv))
        return FakeExecHandle(self._script(ref, spec))

    def _store(self, box: FakeBox, path: str) -> tuple[dict[str, bytes], str]:
        for mount in box.spec.mounts:
            if mount.kind == "volume" and (path + "/").startswith(mount.target.rstrip("/") + "/"):
                return self.volumes.setdefault(mount.source, {}), posixpath.relpath(path, mount.target)
        return box.files, path

    async def put_files(self, ref: SandboxRef, dest_dir: str, files: Sequence[FileEntry]) -> None:
        box = self._box(ref)
        for entry in files:
            store, key = self._store(box, posixpath.join(dest_dir, entry.path))
            store[key] = entry.content

    async def get_file(self, ref: SandboxRef, path: str) -> bytes:
        store, key = self._store(self._box(ref), path)
        if key not in store:
            raise SandboxError(ref.name, f"file not found: {path}")
        return store[key]

    async def ensure_volume(
        self, name: str, labels: Mapping[str, str], *, tmpfs_bytes: int | None = None
    ) -> bool:
        if name in self.volume_labels:
            return False
        self.volumes.setdefault(name, {})
        self.volume_labels[name] = dict(labels)
        return True

    async def remove_volume(self, name: str) -> None:
        self.volumes.pop(name, None)
        self.volume_labels.pop(name, None)

    def _mounted(self, name: str) -> bool:
        return any(
            m.kind == "volume" and m.source == name for b in self.boxes.values() for m in b.spec.mounts
        )

    async def sweep_networks(self) -> list[str]:
        return []

    async def list_volumes(self, labels: Mapping[str, str], *, unused: bool = False) -> list[VolumeInfo]:
        return [
            VolumeInfo(name=name, labels=have)
            for name, have in self.volume_labels.items()
            if all(have.get(k) == v for k, v in labels.items()) and not (unused and self._mounted(name))
        ]

    async def copy_volume(self, source: str, target: str, *, image: str, owner: tuple[int, int]) -> None:
        self.copies.append((source, target))
        self.volumes.setdefault(target, {}).update(self.volumes.get(source, {}))

    async def disk_limit_supported(self) -> bool:
        return False

    async def list_processes(self, ref: SandboxRef) -> list[ProcessInfo]:
        return list(self.processes.get(self._box(ref).ref.id, []))

    async def kill_processes(self, ref: SandboxRef, pids: Sequence[int], *, user: str) -> None:
        box_id = self._box(ref).ref.id
        self.killed.extend(pids)
        self.processes[box_id] = [p for p in self.processes.get(box_id, []) if p.pid not in pids]
