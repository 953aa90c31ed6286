"""`DockerBackend`: the `SandboxBackend` on the docker SDK's low-level `APIClient`.

Every SDK call runs in a worker thread (STYLE R12): short calls on anyio's default limiter, exec
streams on a dedicated `CapacityLimiter(settings.max_streams)` so that long turns cannot starve
the rest of the process. Engine errors are translated here, once (`engine_errors`).
"""

from __future__ import annotations

import functools
import math
import posixpath
import secrets
import signal as signals
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

import anyio
import docker
import docker.errors
import docker.types
from anyio import to_thread

from orchestrator.errors import SandboxError, SandboxNotFound
from orchestrator.sandbox.backend import (
    CreateSpec,
    ExecSpec,
    FileEntry,
    ResourceUsage,
    SandboxInfo,
    SandboxRef,
    SandboxStatus,
    VolumeMount,
)
from orchestrator.sandbox.docker.archive import dir_tar, files_tar, read_single_file
from orchestrator.sandbox.docker.egress import DockerEgress
from orchestrator.sandbox.docker.errors import engine_errors
from orchestrator.sandbox.docker.exec import PID_DIR, DockerExecHandle, signal_script, wrap_argv
from orchestrator.settings import Settings

_P = ParamSpec("_P")
_T = TypeVar("_T")

_STATES = {
    "created": SandboxStatus.CREATED,
    "running": SandboxStatus.RUNNING,
    "paused": SandboxStatus.PAUSED,
    "restarting": SandboxStatus.RESTARTING,
    "exited": SandboxStatus.STOPPED,
    "removing": SandboxStatus.REMOVING,
    "dead": SandboxStatus.DEAD,
}
_INIT_MOUNT = "/cage-mount-init"


def _time(value: str | None) -> datetime | None:
    """Docker's RFC 3339 nanosecond timestamps; the zero time means "never"."""
    if not value or value.startswith("0001-"):
        return None
    head, _, frac = value.rstrip("Z").partition(".")
    frac = (frac + "000000")[:6]
    return datetime.fromisoformat(f"{head}.{frac}").replace(tzinfo=UTC)


class DockerBackend:
    """SandboxBackend on a Docker engine (local socket, `DOCKER_HOST` or `settings.docker_host`)."""

    def __init__(self, settings: Settings, *, client_factory: Callable[[], Any] | None = None) -> None:
        self._settings = settings
        self._factory = client_factory or self._default_factory
        self._client: Any = None
        self._client_lock = threading.Lock()
        self.stream_limiter = anyio.CapacityLimiter(settings.max_streams)
        self.egress = DockerEgress(self._api, settings)

    @classmethod
    def from_settings(cls, settings: Settings) -> DockerBackend:
        return cls(settings)

    def _default_factory(self) -> Any:
        if self._settings.docker_host:
            return docker.APIClient(base_url=self._settings.docker_host, version="auto")
        return docker.APIClient(**docker.utils.kwargs_from_env(), version="auto")

    def _api(self) -> Any:
        with self._client_lock:
            if self._client is None:
                self._client = self._factory()
            return self._client

    async def _call(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        return await to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    def _sync(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._api(), method)(*args, **kwargs)

    async def ping(self) -> None:
        with engine_errors():
            await self._call(self._sync, "ping")

    async def find(self, labels: Mapping[str, str]) -> list[SandboxRef]:
        filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
        with engine_errors():
            rows = await self._call(self._sync, "containers", all=True, filters=filters)
        return [
            SandboxRef(
                id=row["Id"],
                name=(row.get("Names") or ["/"])[0].lstrip("/"),
                labels=row.get("Labels") or {},
                status=_STATES.get(row.get("State", ""), SandboxStatus.DEAD),
            )
            for row in rows
        ]

    async def inspect(self, sandbox_id: str) -> SandboxInfo:
        with engine_errors(sandbox_id):
            data = await self._call(self._sync, "inspect_container", sandbox_id)
        state = data.get("State") or {}
        config = data.get("Config") or {}
        status = _STATES.get(state.get("Status", ""), SandboxStatus.DEAD)
        usage = ResourceUsage()
        if status is SandboxStatus.RUNNING:
            usage = await self._usage(sandbox_id)
        ref = SandboxRef(
            id=data["Id"],
            name=data.get("Name", "").lstrip("/"),
            labels=config.get("Labels") or {},
            status=status,
        )
        return SandboxInfo(
            ref=ref,
            image=config.get("Image", ""),
            created_at=_time(data.get("Created")),
            started_at=_time(state.get("StartedAt")),
            finished_at=_time(state.get("FinishedAt")),
            usage=usage,
            user=config.get("User", ""),
        )

    async def _usage(self, sandbox_id: str) -> ResourceUsage:
        try:
            with engine_errors(sandbox_id):
                stats = await self._call(self._sync, "stats", sandbox_id, stream=False, one_shot=True)
        except SandboxError:  # stats are best effort: a box stopping meanwhile is not an error
            return ResourceUsage()
        mem = (stats.get("memory_stats") or {}).get("usage")
        pids = (stats.get("pids_stats") or {}).get("current")
        return ResourceUsage(memory_bytes=mem, pids=pids)

    async def create(self, spec: CreateSpec) -> SandboxRef:
        if spec.egress is None:
            return await self._create_container(spec)
        network = await self.egress.attach(spec.name, spec.egress, gateway=spec.gateway_relay)
        try:
            return await self._create_container(spec.model_copy(update={"egress": None, "network": network}))
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.egress.detach(spec.name)
            raise

    async def _create_container(self, spec: CreateSpec) -> SandboxRef:
        with engine_errors(spec.name, not_found=f"image {spec.image}"):
            container_id = await self._call(self._create_sync, spec)
        try:
            for mount in spec.mounts:
                if isinstance(mount, VolumeMount) and mount.owner is not None:
                    await self._own_mount(container_id, spec, mount, mount.owner)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._call(self._sync, "remove_container", container_id, force=True)
            raise
        return SandboxRef(id=container_id, name=spec.name, labels=dict(spec.labels))

    def _create_sync(self, spec: CreateSpec) -> str:
        api = self._api()
        mounts = [
            docker.types.Mount(
                target=m.target,
                source=m.source,
                type="volume" if isinstance(m, VolumeMount) else "bind",
                read_only=m.read_only,
            )
            for m in spec.mounts
        ]
        limits = spec.limits
        host_config = api.create_host_config(
            mounts=mounts,
            mem_limit=limits.memory_bytes,
            memswap_limit=limits.memory_bytes,
            nano_cpus=limits.nano_cpus,
            pids_limit=limits.pids,
            cap_drop=list(spec.cap_drop) or None,
            cap_add=list(spec.cap_add) or None,
            security_opt=list(spec.security_opt) or None,
            read_only=spec.read_only,
            init=spec.init or None,
            tmpfs=dict(spec.tmpfs) or None,
            network_mode=spec.network,
            runtime=spec.runtime,
            extra_hosts=dict(spec.extra_hosts) or None,
            port_bindings={
                f"{p.container_port}/{p.protocol}": ("127.0.0.1", p.host_port or None) for p in spec.ports
            }
            or None,
        )
        created = api.create_container(
            image=spec.image,
            command=list(spec.command) or None,
            name=spec.name,
            user=spec.user or None,
            environment=[f"{k}={v}" for k, v in spec.env.items()],
            labels=dict(spec.labels),
            working_dir=spec.workdir or None,
            host_config=host_config,
            ports=[(p.container_port, p.protocol) for p in spec.ports] or None,
        )
        return str(created["Id"])

    async def _own_mount(
        self, container_id: str, spec: CreateSpec, mount: VolumeMount, owner: tuple[int, int]
    ) -> None:
        """Give the volume's root to `owner` by extracting a directory entry over it.

        The engine extracts archives as root outside the container, so this needs no capability
        inside it. A read-only root filesystem refuses archives, so for those a throw-away
        container (created, never started) with the volume at `_INIT_MOUNT` is used.
        """
        uid, gid = owner
        if not spec.read_only:
            parent, name = posixpath.split(mount.target.rstrip("/"))
            data = dir_tar(name, uid=uid, gid=gid)
            with engine_errors(container_id):
                await self._call(self._sync, "put_archive", container_id, parent or "/", data)
            return
        helper = f"{spec.name}-mount-init-{secrets.token_hex(4)}"
        with engine_errors(spec.name, not_found=f"image {spec.image}"):
            made = await self._call(
                self._sync,
                "create_container",
                image=spec.image,
                command=["true"],
                name=helper,
                labels={**spec.labels, "cage.helper": "mount-init"},
                network_disabled=True,
                host_config=self._api().create_host_config(
                    mounts=[docker.types.Mount(target=_INIT_MOUNT, source=mount.source, type="volume")],
                    network_mode="none",
                ),
            )
        try:
            with engine_errors(helper):
                data = dir_tar(_INIT_MOUNT[1:], uid=uid, gid=gid)
                await self._call(self._sync, "put_archive", made["Id"], "/", data)
        finally:
            with anyio.CancelScope(shield=True), engine_errors(helper):
                await self._call(self._sync, "remove_container", made["Id"], force=True)

    async def start(self, ref: SandboxRef) -> None:
        with engine_errors(ref.name or ref.id):
            await self._call(self._sync, "start", ref.id)

    async def stop(self, ref: SandboxRef, *, timeout: float = 2.0) -> None:  # noqa: ASYNC109 - engine grace
        with engine_errors(ref.name or ref.id):
            await self._call(self._sync, "stop", ref.id, timeout=max(0, math.ceil(timeout)))

    async def remove(self, ref: SandboxRef, *, force: bool = False) -> None:
        try:
            with engine_errors(ref.name or ref.id):
                await self._call(self._sync, "remove_container", ref.id, force=force, v=True)
        except SandboxError as exc:
            if not (isinstance(exc, SandboxNotFound) or "already in progress" in str(exc)):
                raise
        if ref.name:
            await self.egress.detach(ref.name)  # its network, if it had one of its own

    async def exec(self, ref: SandboxRef, spec: ExecSpec) -> DockerExecHandle:
        pid_file = f"{PID_DIR}/{secrets.token_hex(8)}.pid"
        with engine_errors(ref.name or ref.id):
            exec_id, sock = await self._call(self._start_exec, ref.id, spec, pid_file)
        try:
            reader = sock._response.raw._fp.fp
            raw = getattr(sock, "_sock", sock)
            raw.settimeout(None)
        except AttributeError as exc:
            raise SandboxError(ref.name, "this Docker transport does not support exec streams") from exc
        handle = DockerExecHandle(
            sandbox_id=ref.name or ref.id,
            raw_sock=raw,
            reader=reader,
            keepalive=sock._response,
            inspect=functools.partial(self._exec_inspect, ref, exec_id),
            send_signal=functools.partial(self._signal, ref, spec.user, pid_file),
            limiter=self.stream_limiter,
            max_line_bytes=self._settings.max_line_bytes,
            stderr_keep_bytes=self._settings.stderr_keep_bytes,
            grace=spec.grace_seconds,
        )
        if isinstance(spec.stdin, bytes):
            if spec.stdin:
                await handle.write_stdin(spec.stdin)
            await handle.close_stdin()
        elif spec.stdin is None:
            await handle.close_stdin()
        return handle

    def _start_exec(self, container_id: str, spec: ExecSpec, pid_file: str) -> tuple[str, Any]:
        api = self._api()
        created = api.exec_create(
            container_id,
            wrap_argv(spec.argv, pid_file),
            stdin=spec.stdin is not None,
            user=spec.user,
            environment=[f"{k}={v}" for k, v in spec.env.items()] or None,
            workdir=spec.workdir or None,
        )
        return created["Id"], api.exec_start(created["Id"], socket=True)

    async def _exec_inspect(self, ref: SandboxRef, exec_id: str) -> dict[str, Any]:
        with engine_errors(ref.name or ref.id):
            result: dict[str, Any] = await self._call(self._sync, "exec_inspect", exec_id)
        return result

    async def _signal(self, ref: SandboxRef, user: str, pid_file: str, sig: signals.Signals) -> None:
        def run() -> None:
            api = self._api()
            created = api.exec_create(ref.id, signal_script(pid_file, sig), user=user)
            api.exec_start(created["Id"])

        try:
            with engine_errors(ref.name or ref.id):
                await self._call(run)
        except SandboxError:  # the box or the process is gone: nothing left to signal
            return

    async def put_files(self, ref: SandboxRef, dest_dir: str, files: Sequence[FileEntry]) -> None:
        data = await self._call(files_tar, files)
        with engine_errors(ref.name or ref.id, not_found=f"directory {dest_dir}"):
            await self._call(self._sync, "put_archive", ref.id, dest_dir, data)

    async def get_file(self, ref: SandboxRef, path: str) -> bytes:
        limit = self._settings.max_line_bytes

        def fetch() -> bytes:
            stream, _stat = self._api().get_archive(ref.id, path)
            return read_single_file(stream, limit=limit)

        with engine_errors(ref.name or ref.id, not_found=f"file {path}"):
            try:
                return await self._call(fetch)
            except (ValueError, IsADirectoryError) as exc:
                raise SandboxError(ref.name or ref.id, f"cannot read {path}: {exc}") from exc

    async def ensure_volume(self, name: str, labels: Mapping[str, str]) -> bool:
        try:
            with engine_errors(name, not_found="volume"):
                await self._call(self._sync, "inspect_volume", name)
            return False
        except SandboxError as exc:
            if not isinstance(exc.__cause__, docker.errors.NotFound):
                raise
        with engine_errors(name):
            await self._call(self._sync, "create_volume", name, labels=dict(labels))
        return True

    async def remove_volume(self, name: str) -> None:
        try:
            with engine_errors(name, not_found="volume"):
                await self._call(self._sync, "remove_volume", name, force=True)
        except SandboxError as exc:
            if isinstance(exc.__cause__, docker.errors.NotFound):
                return
            raise
