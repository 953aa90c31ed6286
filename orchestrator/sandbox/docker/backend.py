"""`DockerBackend`: the `SandboxBackend` on the docker SDK's low-level `APIClient`.

Every SDK call runs in a worker thread (STYLE R12): short calls on anyio's default limiter, exec
streams on a dedicated `CapacityLimiter(settings.max_streams)` so that long turns cannot starve
the rest of the process. Engine errors are translated here, once (`engine_errors`).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import math
import posixpath
import secrets
import signal as signals
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import anyio
import docker
import docker.errors
import docker.types
import structlog
from anyio import to_thread

from orchestrator.errors import SandboxError, SandboxNotFound
from orchestrator.overlap import at_once
from orchestrator.sandbox.backend import (
    CreateSpec,
    ExecSpec,
    FileEntry,
    ProcessInfo,
    ResourceUsage,
    SandboxInfo,
    SandboxRef,
    SandboxState,
    VolumeInfo,
    VolumeMount,
    feed_stdin,
)
from orchestrator.sandbox.docker.archive import dir_tar, files_tar, read_single_file
from orchestrator.sandbox.docker.clients import api_client
from orchestrator.sandbox.docker.egress import GATEWAY_LABEL, POLICY_LABEL, DockerEgress, network_name
from orchestrator.sandbox.docker.errors import engine_errors
from orchestrator.sandbox.docker.exec import DockerExecHandle, signal_script, wrap_argv
from orchestrator.sandbox.docker.frames import hijacked
from orchestrator.sandbox.docker.proxy import BOX, EGRESS_LABEL
from orchestrator.sandbox.docker.timestamps import engine_time
from orchestrator.sandbox.network import GATEWAY_ALIAS, PROXY_ALIAS
from orchestrator.sandbox.putfiles import (
    FILES_VAR,
    INLINE_MAX_BYTES,
    PUT_MARKER,
    PUT_SCRIPT,
    PUT_THEN_EXEC,
    one_owner,
    put_error,
    user_ids,
)
from orchestrator.settings import Settings

log = structlog.get_logger(__name__)
_P = ParamSpec("_P")
_T = TypeVar("_T")

_STATES = {
    "created": SandboxState.CREATED,
    "running": SandboxState.RUNNING,
    "paused": SandboxState.PAUSED,
    "restarting": SandboxState.RESTARTING,
    "exited": SandboxState.STOPPED,
    "removing": SandboxState.REMOVING,
    "dead": SandboxState.DEAD,
}
_INIT_MOUNT = "/cage-mount-init"
PS_SCRIPT = (
    'for d in /proc/[0-9]*; do p=${d#/proc/}; s=$(cat "$d/stat" 2>/dev/null) || continue; '
    's=${s##*) }; set -- $s; e=$(readlink "$d/exe" 2>/dev/null | tr " " "?"); '
    'a=$(tr "\\000\\n" "  " < "$d/cmdline" 2>/dev/null | cut -c1-200); '
    'echo "$p $2 $3 ${20} ${e:--} $a"; done'
)
"""One line per process: pid, ppid, process group, start time (field 22 of stat, read after the
last `) ` so a process name with spaces or parentheses cannot shift the fields), its executable
(readable for the lister's own uid only) and the head of its argv."""


def _own_key(mount: VolumeMount) -> tuple[str, int, int]:
    uid, gid = mount.owner or (0, 0)
    return mount.source, uid, gid


def _process(line: bytes) -> ProcessInfo | None:
    words = line.decode(errors="replace").split()
    try:
        pid, ppid, pgid, start = int(words[0]), int(words[1]), int(words[2]), int(words[3])
    except (IndexError, ValueError):
        return None
    exe = words[4] if len(words) > 4 and words[4] != "-" else ""
    return ProcessInfo(pid=pid, ppid=ppid, pgid=pgid, start=start, exe=exe, argv=tuple(words[5:9]))


def _without_interface(ref: SandboxRef) -> bool:
    """Whether box `ref` has no network interface (its way out served from its namespace)."""
    return ref.labels.get(EGRESS_LABEL) == BOX


class DockerBackend:
    """SandboxBackend on a Docker engine (local socket, `DOCKER_HOST` or `settings.docker_host`)."""

    def __init__(self, settings: Settings, *, client_factory: Callable[[], Any] | None = None) -> None:
        self._settings = settings
        self._factory = client_factory or self._default_factory
        self._client: Any = None
        self._client_lock = threading.Lock()
        self.stream_limiter = anyio.CapacityLimiter(settings.max_streams)
        self.egress = DockerEgress(self._api, settings)
        self._disk_ok: bool | None = None
        self._info: dict[str, Any] | None = None
        self._info_lock = anyio.Lock()
        self._owned: dict[tuple[str, int, int], str] = {}
        """(volume, uid, gid) -> the volume's creation time, once this process gave its root to
        that owner (`_own_mount`): later boxes mount it as it is, without owning it again."""

    @classmethod
    def from_settings(cls, settings: Settings) -> DockerBackend:
        return cls(settings)

    def _default_factory(self) -> Any:
        return api_client(self._settings)

    def _api(self) -> Any:
        with self._client_lock:
            if self._client is None:
                self._client = self._factory()
            return self._client

    async def aclose(self) -> None:
        """Close the engine client, if one was opened, and stop serving the boxes with no interface
        this process served (the next call opens a client again, and an exec serves its box)."""
        await self.egress.aclose()
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            await to_thread.run_sync(client.close)

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
                status=_STATES.get(row.get("State", ""), SandboxState.DEAD),
            )
            for row in rows
        ]

    async def inspect(self, sandbox_id: str) -> SandboxInfo:
        with engine_errors(sandbox_id):
            data = await self._call(self._sync, "inspect_container", sandbox_id)
        state = data.get("State") or {}
        config = data.get("Config") or {}
        status = _STATES.get(state.get("Status", ""), SandboxState.DEAD)
        usage = ResourceUsage()
        if status is SandboxState.RUNNING:
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
            created_at=engine_time(data.get("Created")),
            started_at=engine_time(state.get("StartedAt")),
            finished_at=engine_time(state.get("FinishedAt")),
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
        """Create the box; isolated, either with no network interface at all, its way to the proxy
        served from inside its namespace from `start` on (`netns.py`: a box that publishes no
        ports, where this process can), or on a network of its own that the egress proxy takes and
        joins in `start`, as the box starts (`DockerEgress`: the order)."""
        if spec.egress is None:
            return await self._create_container(spec)
        policy = spec.egress
        fronted = False

        async def front() -> None:
            nonlocal fronted
            fronted = not spec.ports and await self.egress.box_front()

        await at_once(self._engine_info, front)  # the engine's cores (its slowest answer), meanwhile
        if fronted:
            labels = {
                **spec.labels,
                EGRESS_LABEL: BOX,
                POLICY_LABEL: policy.key(),
                **({GATEWAY_LABEL: spec.gateway_relay} if spec.gateway_relay else {}),
            }
            hosts = {PROXY_ALIAS: "127.0.0.1", GATEWAY_ALIAS: "127.0.0.1"}
            update = {"egress": None, "network": "none", "labels": labels, "extra_hosts": hosts}
            box = spec.model_copy(update=update)
            ref = await self._create_container(box)
            await self.egress.admit(spec.name, ref.id, policy)
            return ref
        network = network_name(spec.name)
        try:
            await self.egress.attach(spec.name, policy, gateway=spec.gateway_relay, labels=spec.labels)
            # an internal network publishes nothing: the box's ports go through its relay
            box = spec.model_copy(update={"egress": None, "network": network, "ports": ()})
            ref = await self._create_container(box)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.egress.detach(spec.name)
            raise
        if spec.ports:
            try:
                await self.egress.publish(spec.name, network, spec.ports)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    with contextlib.suppress(SandboxError), engine_errors(ref.name):
                        await self._call(self._sync, "remove_container", ref.id, force=True, v=True)
                    await self.egress.detach(spec.name)
                raise
        return ref

    async def _create_container(self, spec: CreateSpec) -> SandboxRef:
        disk = spec.limits.disk_bytes
        if disk is not None and not await self.disk_limit_supported():
            disk = None
        cores = int((await self._engine_info()).get("NCPU") or 0)
        if cores and spec.limits.nano_cpus and spec.limits.nano_cpus > cores * 10**9:
            # a default quota above the engine's cores is refused by the engine: all its cores
            limits = spec.limits.model_copy(update={"nano_cpus": cores * 10**9})
            spec = spec.model_copy(update={"limits": limits})
        to_own = [m for m in spec.mounts if isinstance(m, VolumeMount) and m.owner is not None]
        stamps = {m.source: await self._volume_stamp(m.source) for m in to_own}
        owned = {m.source for m in to_own if self._owned.get(_own_key(m)) == stamps[m.source] != ""}
        try:
            with engine_errors(spec.name, not_found=f"image {spec.image}"):
                container_id = await self._call(self._create_sync, spec, disk, owned)
        except SandboxError as exc:
            if disk is None or "storage" not in str(exc).lower():
                raise
            self._disk_ok = False  # e.g. overlay2 on xfs without pquota: say so once, go on unbounded
            log.warning("storage driver refuses a writable-layer size; sandboxes are not disk-bounded")
            with engine_errors(spec.name, not_found=f"image {spec.image}"):
                container_id = await self._call(self._create_sync, spec, None, owned)
        try:
            for mount in to_own:
                if mount.source in owned:
                    continue
                assert mount.owner is not None
                await self._own_mount(container_id, spec, mount, mount.owner)
                if stamps[mount.source]:
                    self._owned[_own_key(mount)] = stamps[mount.source]
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._call(self._sync, "remove_container", container_id, force=True)
            raise
        return SandboxRef(id=container_id, name=spec.name, labels=dict(spec.labels))

    async def _volume_stamp(self, name: str) -> str:
        """The volume's creation time (empty when it does not exist yet): a volume removed and made
        again under the same name has another, so its root is given to its owner again."""
        try:
            with engine_errors(name, not_found="volume"):
                info = await self._call(self._sync, "inspect_volume", name)
        except SandboxError as exc:
            if not isinstance(exc.__cause__, docker.errors.NotFound):
                raise
            return ""  # the engine makes it with the container: owned below
        return str((info or {}).get("CreatedAt") or "")

    def _create_sync(self, spec: CreateSpec, disk_bytes: int | None, owned: set[str]) -> str:
        """Create the container; the volumes in `owned` are mounted without the engine's copy of the
        image's mount point into an empty volume (it would hand the volume's root back to root)."""
        api = self._api()
        mounts = [
            docker.types.Mount(
                target=m.target,
                source=m.source,
                type="volume" if isinstance(m, VolumeMount) else "bind",
                read_only=m.read_only,
                no_copy=isinstance(m, VolumeMount) and m.source in owned,
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
            storage_opt={"size": str(disk_bytes)} if disk_bytes else None,
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
            stop_timeout=spec.stop_timeout,
        )
        return str(created["Id"])

    async def _own_mount(
        self, container_id: str, spec: CreateSpec, mount: VolumeMount, owner: tuple[int, int]
    ) -> None:
        """Give the volume's root to `owner` by extracting a directory entry over it.

        The engine extracts archives as root outside the container, so this needs no capability
        inside it. A read-only root filesystem refuses archives, so for those a throw-away
        container (created, never started) with the volume at `_INIT_MOUNT` is used. Made once per
        volume and process (`_owned`, ~40 ms of a cold create): later boxes mount the volume
        without the engine's copy-up, which would hand an empty volume's root back to root.
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
        """Start the box while the egress proxy joins its network and its port relay (if it has
        either) starts: all three independent, the box's policy in force before the proxy joins."""

        async def container() -> None:
            with engine_errors(ref.name or ref.id):
                await self._call(self._sync, "start", ref.id)

        if not ref.name:
            await container()
            return
        name = ref.name
        if _without_interface(ref):  # its policy in force before its way out is served
            await at_once(container, lambda: self.egress.open_box(name))
            await self.egress.serve(ref.id)
            return
        await at_once(container, lambda: self.egress.join(name), lambda: self.egress.resume(name))

    async def stop(self, ref: SandboxRef, *, timeout: float = 2.0) -> None:  # noqa: ASYNC109 - engine grace
        if _without_interface(ref) and ref.name:  # served again when it starts
            await self.egress.close_box(ref.name, ref.id)
        with engine_errors(ref.name or ref.id):
            await self._call(self._sync, "stop", ref.id, timeout=max(0, math.ceil(timeout)))

    async def pause(self, ref: SandboxRef) -> None:
        """Freeze every process of the running box (a warm pool's box waits frozen)."""
        with engine_errors(ref.name or ref.id):
            await self._call(self._sync, "pause", ref.id)

    async def unpause(self, ref: SandboxRef) -> None:
        """Thaw a paused box. The engine checks and clears the paused state under the container's
        lock, so of two callers racing for one box exactly one succeeds; the other gets a
        `SandboxError` (not paused) or `SandboxNotFound` (removed meanwhile)."""
        with engine_errors(ref.name or ref.id):
            await self._call(self._sync, "unpause", ref.id)

    async def remove(self, ref: SandboxRef, *, force: bool = False) -> None:
        """Remove the box and its network. Forced, the proxy leaves the network while the box
        goes (the box loses its way out first, never the other way round)."""

        async def container() -> None:
            try:
                with engine_errors(ref.name or ref.id):
                    await self._call(self._sync, "remove_container", ref.id, force=force, v=True)
            except SandboxError as exc:
                if not (isinstance(exc, SandboxNotFound) or "already in progress" in str(exc)):
                    raise

        if not ref.name:
            await container()
            return
        name = ref.name
        if _without_interface(ref):  # its way out goes first, then the box
            await self.egress.close_box(name, ref.id)
            await container()
            return
        if force:
            await at_once(container, lambda: self.egress.leave(name))
        else:  # a running box refuses: it keeps its way out
            await container()
        await self.egress.detach(name, left=force)  # its network, if it had one of its own

    async def exec(self, ref: SandboxRef, spec: ExecSpec) -> DockerExecHandle:
        if spec.files:
            return await self._exec_with_files(ref, spec)
        handle = await self._open_exec(ref, spec)
        await feed_stdin(handle, spec.stdin)
        return handle

    async def _exec_with_files(self, ref: SandboxRef, spec: ExecSpec) -> DockerExecHandle:
        """`spec.files` extracted by the process that then becomes `spec.argv` (`PUT_THEN_EXEC`),
        when the exec's user is the files' owner and the tar fits a variable; else `put_files`
        first, then the exec."""
        sandbox, dest = ref.name or ref.id, posixpath.normpath(spec.files_dir)
        owner = one_owner(sandbox, spec.files)
        data = await self._call(files_tar, spec.files)
        plain = spec.model_copy(update={"files": (), "files_dir": ""})
        if len(data) > INLINE_MAX_BYTES or user_ids(spec.user) != owner:
            await self._put_tar(ref, dest, data, owner)
            return await self.exec(ref, plain)
        inline = plain.model_copy(
            update={
                "argv": ("sh", "-c", PUT_THEN_EXEC, "cage-put", dest, *spec.argv),
                "env": {**spec.env, FILES_VAR: base64.b64encode(data).decode("ascii")},
            }
        )
        handle = await self._open_exec(ref, inline)
        try:
            status = await handle.read_marked(PUT_MARKER)
            if status != b"0":  # the command never started
                raise put_error(sandbox, dest, await handle.wait(), handle.stderr)
            await feed_stdin(handle, spec.stdin)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await handle.aclose()
            raise
        return handle

    async def _open_exec(self, ref: SandboxRef, spec: ExecSpec) -> DockerExecHandle:
        """The exec started, its process group read; stdin not touched yet."""
        if _without_interface(ref) and not self.egress.serving(ref.id):
            await self.egress.serve(ref.id)  # a box adopted from another process: served first
        with engine_errors(ref.name or ref.id):
            exec_id, sock = await self._call(self._start_exec, ref.id, spec)
        stream = hijacked(sock, ref.name or ref.id)
        stream.sock.settimeout(None)
        handle = DockerExecHandle(
            sandbox_id=ref.name or ref.id,
            raw_sock=stream.sock,
            reader=stream.reader,
            keepalive=stream.response,
            inspect=functools.partial(self._exec_inspect, ref, exec_id),
            send_signal=functools.partial(self._signal, ref, spec.user),
            limiter=self.stream_limiter,
            max_line_bytes=self._settings.max_line_bytes,
            stderr_keep_bytes=self._settings.stderr_keep_bytes,
            grace=spec.grace_seconds,
        )
        await handle.read_pgid()
        return handle

    def _start_exec(self, container_id: str, spec: ExecSpec) -> tuple[str, Any]:
        api = self._api()
        created = api.exec_create(
            container_id,
            wrap_argv(spec.argv),
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

    async def _signal(self, ref: SandboxRef, user: str, pgid: int, sig: signals.Signals) -> None:
        def run() -> None:
            api = self._api()
            created = api.exec_create(ref.id, signal_script(pgid, sig), user=user)
            api.exec_start(created["Id"])

        try:
            with engine_errors(ref.name or ref.id):
                await self._call(run)
        except SandboxError:  # the box or the process is gone: nothing left to signal
            return

    async def put_files(self, ref: SandboxRef, dest_dir: str, files: Sequence[FileEntry]) -> None:
        """Extract the files with GNU tar run *inside* the box as their owner (never root).

        The engine's own `put_archive` extracts as root and follows symlinks the agent planted
        in existing directories (`attachments -> /etc`). Here the writer is the sandbox user,
        `dest_dir` must resolve to itself (no symlink on the way), and tar replaces an existing
        symlink on a member's path instead of following it (directory members included).
        """
        if not files:
            return
        owner = one_owner(ref.name or ref.id, files)
        await self._put_tar(ref, posixpath.normpath(dest_dir), await self._call(files_tar, files), owner)

    async def _put_tar(self, ref: SandboxRef, dest_dir: str, data: bytes, owner: tuple[int, int]) -> None:
        """Extract the tar `data` into `dest_dir` (normalised) as `owner` (`PUT_SCRIPT`)."""
        uid, gid = owner
        spec = ExecSpec(argv=("sh", "-c", PUT_SCRIPT, "cage-put", dest_dir), user=f"{uid}:{gid}", stdin=data)
        async with await self.exec(ref, spec) as handle:
            code = await handle.wait()
        if code != 0:
            raise put_error(ref.name or ref.id, dest_dir, code, handle.stderr)

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

    async def ensure_volume(
        self, name: str, labels: Mapping[str, str], *, tmpfs_bytes: int | None = None
    ) -> bool:
        try:
            with engine_errors(name, not_found="volume"):
                await self._call(self._sync, "inspect_volume", name)
            return False
        except SandboxError as exc:
            if not isinstance(exc.__cause__, docker.errors.NotFound):
                raise
        options = None
        if tmpfs_bytes is not None:
            size = f"size={tmpfs_bytes},uid=1000,gid=1000,mode=0755"
            options = {"type": "tmpfs", "device": "tmpfs", "o": size}
        with engine_errors(name):
            await self._call(self._sync, "create_volume", name, driver_opts=options, labels=dict(labels))
        self._forget_owned(name)
        return True

    def _forget_owned(self, volume: str) -> None:
        for key in [k for k in self._owned if k[0] == volume]:
            del self._owned[key]

    async def sweep_networks(self) -> list[str]:
        return await self.egress.sweep()

    async def list_volumes(self, labels: Mapping[str, str], *, unused: bool = False) -> list[VolumeInfo]:
        filters: dict[str, Any] = {"label": [f"{k}={v}" for k, v in labels.items()]}
        if unused:
            filters["dangling"] = True
        with engine_errors("volumes"):
            data = await self._call(self._sync, "volumes", filters=filters)
        return [
            VolumeInfo(
                name=row["Name"], labels=row.get("Labels") or {}, created_at=engine_time(row.get("CreatedAt"))
            )
            for row in (data or {}).get("Volumes") or []
        ]

    async def copy_volume(self, source: str, target: str, *, image: str, owner: tuple[int, int]) -> None:
        """`cp -a` in a helper container (no network, no capabilities) running as `owner`."""
        helper = f"cage-copy-{secrets.token_hex(6)}"
        with engine_errors(helper, not_found=f"image {image}"):
            made = await self._call(
                self._sync,
                "create_container",
                image=image,
                command=["sh", "-c", "cp -a /cage-from/. /cage-to/"],
                name=helper,
                user=f"{owner[0]}:{owner[1]}",
                labels={"cage.managed": "true", "cage.helper": "volume-copy"},
                network_disabled=True,
                host_config=self._api().create_host_config(
                    mounts=[
                        docker.types.Mount(target="/cage-from", source=source, type="volume", read_only=True),
                        docker.types.Mount(target="/cage-to", source=target, type="volume"),
                    ],
                    network_mode="none",
                    cap_drop=["ALL"],
                    security_opt=["no-new-privileges:true"],
                ),
            )
        try:
            with engine_errors(helper):
                await self._call(self._sync, "start", made["Id"])
                result = await self._call(self._sync, "wait", made["Id"], timeout=600)
            if int((result or {}).get("StatusCode", 1)) != 0:
                raise SandboxError(helper, f"copying volume {source} into {target} failed")
        finally:
            with anyio.CancelScope(shield=True), engine_errors(helper):
                await self._call(self._sync, "remove_container", made["Id"], force=True)

    async def disk_limit_supported(self) -> bool:
        """overlay2 on xfs (mounted with pquota), devicemapper, btrfs and zfs enforce `size`.

        overlay2 on xfs without pquota cannot be told from the info alone: the first create with
        a size that the engine refuses turns it off for this process (see `create`).
        """
        if self._disk_ok is None:
            info = await self._engine_info()
            driver = info.get("Driver", "")
            status = dict(tuple(pair) for pair in info.get("DriverStatus") or [] if len(pair) == 2)
            self._disk_ok = driver in ("devicemapper", "btrfs", "zfs") or (
                driver == "overlay2" and status.get("Backing Filesystem") == "xfs"
            )
        return self._disk_ok

    async def _engine_info(self) -> dict[str, Any]:
        """The engine's `info`, asked once per process (concurrent first callers share the one ask)."""
        async with self._info_lock:
            if self._info is None:
                with engine_errors("engine"):
                    self._info = dict(await self._call(self._sync, "info"))
        return self._info

    async def list_processes(self, ref: SandboxRef) -> list[ProcessInfo]:
        spec = ExecSpec(argv=("sh", "-c", PS_SCRIPT), user="")
        async with await self.exec(ref, spec) as handle:
            lines = [item for item in [line async for line in handle] if isinstance(item, bytes)]
            await handle.wait()
        found = [proc for proc in (_process(line) for line in lines) if proc is not None]
        # not the lister itself: its process group and the `setsid -w` waiting for it
        lister = {proc.pid for proc in found if handle.pgid is not None and proc.pgid == handle.pgid}
        lister |= {proc.ppid for proc in found if proc.pid == handle.pgid and proc.ppid > 1}
        return [proc for proc in found if proc.pid not in lister]

    async def kill_processes(self, ref: SandboxRef, pids: Sequence[int], *, user: str) -> None:
        if not pids:
            return
        argv = ("sh", "-c", 'kill -s KILL "$@" 2>/dev/null; exit 0', "cage-kill", *map(str, pids))
        async with await self.exec(ref, ExecSpec(argv=argv, user=user)) as handle:
            await handle.wait()

    async def remove_volume(self, name: str) -> None:
        self._forget_owned(name)
        try:
            with engine_errors(name, not_found="volume"):
                await self._call(self._sync, "remove_volume", name, force=True)
        except SandboxError as exc:
            if isinstance(exc.__cause__, docker.errors.NotFound):
                return
            raise
