"""`SandboxManager`: identity, reuse-or-recreate, per-identity locks, caps, leases (STYLE R13).

`acquire()` finds or creates the sandbox for a request and returns a `SandboxLease`; the lease marks
the sandbox busy (the reaper never touches it) until `release()`, which starts the idle clock and
removes `oneshot` boxes. The manager speaks only the `SandboxBackend` protocol: no engine types.

Bounds it enforces: `acquire` (image build + prepare) finishes within `settings.acquire_timeout`
or fails and lets go of the identity lock; each owner has at most
`settings.max_workspace_volumes_per_owner` workspace volumes; when a long-lived box goes idle
(its last lease released) every process the turns left behind is killed (`strays`), so a
`nohup`/`setsid` writer never outlives its turn.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import math
import os
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio import to_thread
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.dsl import McpServerSpec
from orchestrator.dsl.sandbox import Lifecycle, SandboxSpec
from orchestrator.dsl.source import stored_label
from orchestrator.errors import CapacityError, SandboxError
from orchestrator.redaction import register_secret
from orchestrator.sandbox.admission import SandboxAdmission
from orchestrator.sandbox.backend import (
    ClusterLock,
    CreateSpec,
    ExecHandle,
    ExecSpec,
    FleetStateBackend,
    Mount,
    SandboxBackend,
    SandboxRef,
    SandboxState,
)
from orchestrator.sandbox.checkout import checkout_mounts, checkout_owner
from orchestrator.sandbox.hashing import config_hash, mcp_document
from orchestrator.sandbox.identity import SandboxIdentity, container_name, identity_for
from orchestrator.sandbox.images import ImageBuilder, ProgressCallback
from orchestrator.sandbox.labels import (
    ASSISTANT,
    CONFIG_HASH,
    MANAGED,
    OWNER,
    SANDBOX,
    VOLUME,
    WORKSPACE,
    SandboxLabels,
    sandbox_labels,
    session_label,
)
from orchestrator.sandbox.limits import (
    MAIN_COMMAND,
    SANDBOX_GID,
    SANDBOX_UID,
    SANDBOX_USER,
    Hardening,
    hardening,
)
from orchestrator.sandbox.locks import KeyedLocks
from orchestrator.sandbox.network import proxy_env, sandbox_egress
from orchestrator.sandbox.pool import PausingBackend, PoolKey, WarmPool, pool_size
from orchestrator.sandbox.prepare import PrepareContext, run_prepare
from orchestrator.sandbox.registry import SandboxRegistry, TrackedSandbox
from orchestrator.sandbox.strays import RESIDENT, stray_pids
from orchestrator.sandbox.workspace import (
    WorkspaceScope,
    legacy_volume_name,
    workspace_mount,
    workspace_scope,
)
from orchestrator.settings import Settings
from orchestrator.spawn import Spawn

log = structlog.get_logger(__name__)
_ENV_REF = "$ENV."
_GONE = (SandboxState.DEAD, SandboxState.REMOVING)
STOP_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL when the reaper stops an adopted box whose labels name no
`stop_timeout` (one created before the label existed); others use their sandbox's `stop_timeout`."""
STRAY_ROUNDS = 4
"""List-and-kill rounds when a box goes idle (a process forking while it is killed is caught next)."""
STRAY_SECONDS = 30.0
"""Time bound of one idle sweep (a box at its pids limit may refuse the lister's exec)."""


class ReleaseOutcome(enum.StrEnum):
    """How the turn that held a lease ended."""

    OK = "ok"
    ERROR = "error"
    CANCELLED = "cancelled"


class SandboxRequest(BaseModel):
    """What a turn needs a sandbox for."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    owner: str
    assistant_id: str
    assistant_dir: Path | None
    """None for an assistant stored in the database (it has no files to copy from)."""
    spec: SandboxSpec
    session_id: str | None = None
    workspace_id: str | None = None
    mcp_servers: tuple[McpServerSpec, ...] = ()
    """The assistant's MCP server entries (feed the config hash)."""
    skills: Mapping[str, str] = Field(default_factory=dict)
    """Skill name -> content digest (feed the config hash)."""
    gateway_port: int | None = None
    """Port of the running model gateway: an isolated box reaches it through the proxy's relay."""
    host_workspace: Path | None = None
    """CI mode: bind-mount this host directory instead of the workspace volume (`.git` read-only,
    its config sanitized); the agent runs as the directory's owner (`checkout.py`)."""


class SandboxLease(BaseModel):
    """A sandbox held for one turn. Pass it back to `release()`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    lease_id: str
    ref: SandboxRef
    identity: SandboxIdentity
    config_hash: str
    image: str
    created: bool
    """True when this acquire created the container (False: reused)."""
    user: str = SANDBOX_USER
    uid: int = SANDBOX_UID
    gid: int = SANDBOX_GID
    """The user execs run as and files written into the box belong to (the checkout owner in CI mode)."""
    work_dir: str
    mount_path: str
    grace_seconds: float
    env: Mapping[str, str] = Field(default_factory=dict, repr=False)
    """Environment for execs (secrets with an `env` name included): never logged, never labelled."""
    isolated: bool = False
    """The box sits on a network of its own behind the egress proxy (the gateway is `cage-gateway`)."""
    pooled: bool = False
    """The box was claimed from the warm pool (made ahead for this owner's workspace: `pool.py`)."""


def _resolve(value: str) -> str:
    return os.environ.get(value[len(_ENV_REF) :], "") if value.startswith(_ENV_REF) else value


def _seconds(delta: Any) -> float | None:
    return None if delta is None else float(delta.total_seconds())


class SandboxManager:
    """Hands out sandboxes by identity, creating, reusing or recreating them."""

    def __init__(
        self,
        backend: SandboxBackend,
        images: ImageBuilder,
        settings: Settings,
        *,
        extra_labels: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backend = backend
        self.images = images
        self.settings = settings
        self.extra_labels = dict(extra_labels or {})
        """Added to every sandbox and volume, and required by reconcile (deployment or test-run ids)."""
        self.locks = KeyedLocks()
        self._cluster_lock: ClusterLock | None = None
        self.registry = SandboxRegistry(
            max_total=settings.max_sandboxes, max_per_owner=settings.max_sandboxes_per_owner, clock=clock
        )
        self.admission = SandboxAdmission(
            self.registry, max_total=settings.max_sandboxes, max_per_owner=settings.max_sandboxes_per_owner
        )
        """The quick cap check as a turn is admitted (`admission.admit`), before any box exists."""
        self._leases: set[str] = set()
        self.started_at = clock()
        self._volume_used: dict[str, float] = {}
        """Workspace volume -> manager-clock time of its last acquire or release (volume GC)."""
        self._legacy_checked: set[str] = set()
        self.gateway_port: int | None = None
        """The running model gateway's port: isolated sandboxes reach it through the proxy's relay."""
        self.pool: WarmPool | None = None
        """Warm boxes for `oneshot` turns (`start_pool`; `cage serve` only, never `cage run`)."""
        self._refills: dict[str, tuple[PoolKey, int]] = {}
        """Lease id -> the pool to top up when it is released. Not before: a box created on a still
        empty volume gets the image's mount point copied over the volume's root (root-owned) until
        its own ownership step runs, so a refill racing its turn could refuse that turn's writes."""

    @property
    def cluster_lock(self) -> ClusterLock | None:
        """Set by a server whose database other replicas share: a lock across them (`hold`), and
        the caps then count every replica's boxes in the engine (`_reserve`). A backend with state
        every replica writes (`FleetStateBackend`) is given it too."""
        return self._cluster_lock

    @cluster_lock.setter
    def cluster_lock(self, lock: ClusterLock | None) -> None:
        self._cluster_lock = lock
        if lock is not None and isinstance(self.backend, FleetStateBackend):
            self.backend.use_cluster_lock(lock)

    def start_pool(self, spawn: Spawn) -> WarmPool | None:
        """Turn the warm pool on, refills running through `spawn`; None when the backend cannot
        pause and thaw a box atomically (the claim), which the log says once."""
        if not isinstance(self.backend, PausingBackend):
            log.warning(
                "warm pool off: this sandbox backend cannot pause a box", backend=type(self.backend).__name__
            )
            return None
        self.pool = WarmPool(
            self.backend,
            self.backend,
            self.registry,
            self.settings,
            extra_labels=self.extra_labels,
            spawn=spawn,
        )
        return self.pool

    async def acquire(
        self, request: SandboxRequest, *, on_progress: ProgressCallback | None = None
    ) -> SandboxLease:
        """The sandbox for `request`, running, prepared, and marked busy.

        `on_progress` receives the image build's progress when the runner image must be built.

        Raises:
            CapacityError: creating it would pass `max_sandboxes` or `max_sandboxes_per_owner`.
            ConfigError: the spec asks for something the backend cannot enforce.
            PrepareError, WorkspaceError, ImageBuildError, SandboxError, EngineUnavailable.
        """
        identity = identity_for(
            request.spec.lifecycle,
            owner=request.owner,
            assistant_id=request.assistant_id,
            session_id=request.session_id,
            workspace_id=request.workspace_id,
        )
        limit = self.settings.acquire_timeout
        try:
            with anyio.fail_after(limit):
                return await self._acquire(request, identity, on_progress)
        except TimeoutError as exc:
            log.warning("sandbox acquire timed out", sandbox=identity.name, seconds=limit)
            raise SandboxError(
                identity.name,
                f"not ready within {limit:g}s (image build and prepare steps); a prepare step may hang"
                " (give it a `timeout`) or raise CAGE_ACQUIRE_TIMEOUT",
            ) from exc

    async def _acquire(
        self, request: SandboxRequest, identity: SandboxIdentity, on_progress: ProgressCallback | None
    ) -> SandboxLease:
        spec = request.spec
        source = (request.assistant_dir or stored_label(request.assistant_id)) / "sandbox.yao"
        hard = hardening(
            spec.computer,
            source=source,
            default_cpus=self.settings.default_cpus,
            disk_bytes=self.settings.sandbox_disk,
        )
        uid, gid = SANDBOX_UID, SANDBOX_GID
        if request.host_workspace is not None:
            uid, gid = await to_thread.run_sync(checkout_owner, request.host_workspace)
            hard = hard.model_copy(update={"user": f"{uid}:{gid}"})
        image = await self.images.ensure(spec.runner.name, base=spec.computer.image, on_progress=on_progress)
        digest = config_hash(
            spec,
            image_hash=image.image_hash,
            mcp_servers=[mcp_document(m) for m in request.mcp_servers],
            skills=dict(request.skills),
        )
        if self.isolates(spec):  # its network's relay points at one gateway: another one means a new box
            relay = f"{self.settings.gateway_relay_host}:{request.gateway_port or self.gateway_port}"
            digest = hashlib.sha256(f"{digest}\0{relay}".encode()).hexdigest()
        exec_env = self._exec_env(spec)
        pool_key, size, pooled = self._pool_key(request, identity, digest), 0, False
        if pool_key is not None:
            size = pool_size(spec, self.settings)
        async with self.hold(identity.name):
            ref, created = await self._reuse(identity, digest)
            if ref is None and self.pool is not None and pool_key is not None and size:
                ref = await self.pool.claim(pool_key)
                if ref is not None:
                    identity = identity.model_copy(update={"name": ref.name})
                    pooled = True
            if ref is None:
                ref = await self._create(request, identity, digest, image.tag, hard, pool_key=pool_key)
                created = True
            box = self.registry.get(identity.name)
            assert box is not None  # _reuse and _create both register the box
            box.busy += 1
            box.resident = RESIDENT.get(spec.runner.name, ())
            try:
                report = await run_prepare(
                    self.backend,
                    spec.prepare,
                    PrepareContext(
                        sandbox=ref,
                        assistant_id=request.assistant_id,
                        assistant_dir=request.assistant_dir,
                        config_hash=digest,
                        mount_path=spec.computer.mount_path,
                        work_dir=spec.computer.work_dir,
                        env=exec_env,
                        grace_seconds=spec.stop_timeout.total_seconds(),
                        user=hard.user if request.host_workspace is not None else SANDBOX_USER,
                        uid=uid,
                        gid=gid,
                    ),
                )
                if report.background:
                    await self._keep(box, report.background)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._after_turn(identity.name, remove=identity.lifecycle is Lifecycle.ONESHOT)
                raise
        lease = SandboxLease(
            lease_id=secrets.token_hex(8),
            ref=ref,
            identity=identity,
            config_hash=digest,
            image=image.tag,
            created=created,
            user=hard.user if request.host_workspace is not None else SANDBOX_USER,
            uid=uid,
            gid=gid,
            work_dir=spec.computer.work_dir,
            mount_path=spec.computer.mount_path,
            grace_seconds=spec.stop_timeout.total_seconds(),
            env=exec_env,
            isolated=self.isolates(spec),
            pooled=pooled,
        )
        self._leases.add(lease.lease_id)
        if self.pool is not None and pool_key is not None and size:
            self._refills[lease.lease_id] = (pool_key, size)
        if request.host_workspace is None:
            self._volume_used[workspace_scope(identity).volume_name] = self.registry.clock()
        log.info(
            "sandbox acquired", sandbox=identity.name, created=created, lifecycle=identity.lifecycle.value
        )
        return lease

    async def release(self, lease: SandboxLease, outcome: ReleaseOutcome = ReleaseOutcome.OK) -> None:
        """End a turn: the idle clock starts; a `oneshot` box is removed whatever the outcome. Idempotent."""
        if lease.lease_id not in self._leases:
            return
        self._leases.discard(lease.lease_id)
        refill = self._refills.pop(lease.lease_id, None)
        with anyio.CancelScope(shield=True):
            async with self.locks.hold(lease.identity.name):
                await self._after_turn(
                    lease.identity.name, remove=lease.identity.lifecycle is Lifecycle.ONESHOT
                )
                box = self.registry.get(lease.identity.name)
                if box is not None and not box.busy and not box.stopped:
                    await self.kill_strays(box, user=lease.user)
        volume = workspace_scope(lease.identity).volume_name
        if volume in self._volume_used:
            self._volume_used[volume] = self.registry.clock()
        if refill is not None and self.pool is not None:
            self.pool.refill(*refill)
        log.info("sandbox released", sandbox=lease.identity.name, outcome=outcome.value)

    @asynccontextmanager
    async def lease(self, request: SandboxRequest) -> AsyncIterator[SandboxLease]:
        """`acquire` ... `release`, with the outcome taken from how the block ended."""
        held = await self.acquire(request)
        outcome = ReleaseOutcome.OK
        try:
            yield held
        except anyio.get_cancelled_exc_class():
            outcome = ReleaseOutcome.CANCELLED
            raise
        except BaseException:
            outcome = ReleaseOutcome.ERROR
            raise
        finally:
            await self.release(held, outcome)

    async def exec(self, lease: SandboxLease, spec: ExecSpec) -> ExecHandle:
        """Run a process in the leased sandbox as `sandbox` in the work dir, with the lease's env."""
        box = self.registry.get(lease.identity.name)
        if box is not None:
            box.last_used = self.registry.clock()
        full = spec.model_copy(
            update={
                "user": spec.user or lease.user,
                "workdir": spec.workdir or lease.work_dir,
                "env": {"HOME": lease.work_dir, **lease.env, **spec.env},
            }
        )
        return await self.backend.exec(lease.ref, full)

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        """The lock of one sandbox identity: this process's, then (`cluster_lock`, on a database
        several replicas share) the cluster's, so two replicas never create, reuse and reap one box
        at once."""
        async with self.locks.hold(name):
            if self.cluster_lock is None:
                yield
                return
            async with self.cluster_lock(f"sandbox:{name}"):
                yield

    def adopt(self, ref: SandboxRef, labels: SandboxLabels, *, age: float) -> TrackedSandbox:
        """Track a sandbox found in the engine (reconcile); its idle clock starts now."""
        now = self.registry.clock()
        box = TrackedSandbox(
            ref=ref,
            owner=labels.owner,
            assistant_id=labels.assistant_id,
            lifecycle=labels.lifecycle,
            config_hash=labels.config_hash,
            idle_timeout=labels.idle_timeout,
            max_lifetime=labels.max_lifetime,
            stop_timeout=labels.stop_timeout if labels.stop_timeout is not None else STOP_GRACE,
            created_at=now - age,
            last_used=now,
            stopped=ref.status is not SandboxState.RUNNING,
        )
        self.registry.put(box)
        return box

    async def retire(self, name: str, *, remove: bool, still: Callable[[TrackedSandbox], bool]) -> bool:
        """Stop or remove a tracked sandbox if, under its lock, `still(box)` holds. True when done."""
        async with self.hold(name):
            box = self.registry.get(name)
            if box is None or box.busy or not still(box):
                return False
            if remove:
                await self.backend.remove(box.ref, force=True)
                self.registry.drop(name)
            else:
                await self.backend.stop(box.ref, timeout=box.stop_timeout)
                box.stopped = True
            log.info("sandbox reaped", sandbox=name, removed=remove)
            return True

    def _exec_env(self, spec: SandboxSpec) -> dict[str, str]:
        env = {name: _resolve(value) for name, value in spec.environment.items()}
        for secret in spec.secrets.values():
            if secret.env:
                value = _resolve(secret.value)
                register_secret(value)
                env[secret.env] = value
        return env

    async def _reuse(self, identity: SandboxIdentity, digest: str) -> tuple[SandboxRef | None, bool]:
        if identity.lifecycle is Lifecycle.ONESHOT:
            return None, False
        await self._drop_legacy(identity)
        found = await self.backend.find({MANAGED: "true", SANDBOX: identity.name})
        keep: SandboxRef | None = None
        for ref in found:
            if ref.name != identity.name:
                continue
            if keep is None and ref.labels.get(CONFIG_HASH) == digest and ref.status not in _GONE:
                keep = ref
                continue
            log.info("sandbox config changed, recreating", sandbox=identity.name)
            await self.backend.remove(ref, force=True)
            self.registry.drop(identity.name)
        if keep is None:
            self.registry.drop(identity.name)  # removed behind our back: forget it before counting caps
            return None, False
        if keep.status is not SandboxState.RUNNING:
            await self.backend.start(keep)
        box = self.registry.get(identity.name)
        if box is None:
            info = await self.backend.inspect(keep.id)
            labels = SandboxLabels.parse(info.ref.labels)
            if labels is None:
                raise SandboxError(identity.name, "labels are incomplete; remove it to let Cage recreate it")
            box = self.adopt(info.ref, labels, age=_age(info.created_at))
        box.ref = keep.model_copy(update={"status": SandboxState.RUNNING})
        box.stopped = False
        return box.ref, False

    def _pool_key(self, request: SandboxRequest, identity: SandboxIdentity, digest: str) -> PoolKey | None:
        """The warm-pool key of a `oneshot` request on a workspace volume (never a CI checkout)."""
        if self.pool is None or identity.lifecycle is not Lifecycle.ONESHOT or request.host_workspace:
            return None
        return PoolKey(
            owner=identity.owner,
            assistant_id=identity.assistant_id,
            workspace_id=identity.workspace_id,
            shared_workspace=identity.shared_workspace,
            config_hash=digest,
        )

    async def _reserve(self, owner: str) -> None:
        """Count a box about to be created; past a cap, an unclaimed pooled box makes room first."""
        try:
            await self._check_fleet(owner)
            self.registry.reserve(owner)
        except CapacityError:
            if self.pool is None or not await self.pool.evict(owner):
                raise
            await self._check_fleet(owner)
            self.registry.reserve(owner)

    async def _check_fleet(self, owner: str) -> None:
        """With replicas (`cluster_lock` set), the caps count every replica's boxes: the engine's
        managed sandboxes of this deployment, this process's tracked ones and its creates in flight.

        Raises:
            CapacityError: the fleet holds `max_sandboxes` boxes, or `max_sandboxes_per_owner` of
                `owner`'s.
        """
        if self.cluster_lock is None:
            return
        found = await self.backend.find({**self.extra_labels, MANAGED: "true"})
        owners = {r.name: r.labels.get(OWNER) for r in found if SANDBOX in r.labels}
        tracked = self.registry.all()
        owners.update((b.ref.name, b.owner) for b in tracked)
        in_flight = self.registry.count() - len(tracked)
        owner_in_flight = self.registry.count(owner) - sum(1 for b in tracked if b.owner == owner)
        if len(owners) + in_flight >= self.settings.max_sandboxes:
            raise CapacityError("all owners, every replica", self.settings.max_sandboxes)
        mine = sum(1 for o in owners.values() if o == owner) + owner_in_flight
        if mine >= self.settings.max_sandboxes_per_owner:
            raise CapacityError(f"owner {owner}, every replica", self.settings.max_sandboxes_per_owner)

    async def _create(
        self,
        request: SandboxRequest,
        identity: SandboxIdentity,
        digest: str,
        image: str,
        hard: Hardening,
        *,
        pool_key: PoolKey | None = None,
    ) -> SandboxRef:
        spec = request.spec
        # with replicas, one owner's creates take turns from the count until the box is in the
        # engine, so two replicas never both take the owner's last place
        slot = AsyncExitStack()
        if self.cluster_lock is not None:
            await slot.enter_async_context(self.cluster_lock(f"caps:{identity.owner}"))
        try:
            await self._reserve(identity.owner)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await slot.aclose()
            raise
        try:
            scope = workspace_scope(identity)
            mount = await to_thread.run_sync(  # resolves the host path: file system calls
                functools.partial(
                    workspace_mount,
                    volume=scope.volume_name,
                    mount_path=spec.computer.mount_path,
                    read_only=spec.computer.mount_mode == "ro",
                    host_path=request.host_workspace,
                )
            )
            mounts: tuple[Mount, ...] = (mount,)
            if request.host_workspace is not None:
                mounts = await to_thread.run_sync(
                    functools.partial(
                        checkout_mounts,
                        request.host_workspace,
                        spec.computer.mount_path,
                        read_only=spec.computer.mount_mode == "ro",
                        scratch=self.settings.data_dir.resolve(),
                    )
                )
            legacy = await self._ensure_workspace(scope, image) if mount.kind == "volume" else None
            idle = _seconds(spec.effective_idle_timeout())
            lifetime = _seconds(spec.max_lifetime)
            grace = spec.stop_timeout.total_seconds()
            create = CreateSpec(
                image=image,
                name=identity.name,
                command=MAIN_COMMAND,
                labels=sandbox_labels(
                    identity,
                    config_hash=digest,
                    idle_timeout=idle,
                    max_lifetime=lifetime,
                    stop_timeout=grace,
                    extra=self.extra_labels,
                ),
                env={k: _resolve(v) for k, v in spec.environment.items()},
                user=hard.user,
                workdir=spec.computer.work_dir,
                mounts=mounts,
                limits=hard.limits,
                cap_drop=hard.cap_drop,
                cap_add=hard.cap_add,
                security_opt=hard.security_opt,
                read_only=hard.read_only,
                tmpfs=hard.tmpfs,
                network=hard.network,
                runtime=hard.runtime,
                extra_hosts=hard.extra_hosts,
                ports=hard.ports,
                stop_timeout=math.ceil(grace),
            )
            create = self._isolate(create, spec, request.gateway_port)
            if self.pool is not None and pool_key is not None:
                self.pool.remember(pool_key, create)
            ref = await self.backend.create(create)
            with anyio.CancelScope(shield=True):
                await slot.aclose()  # the box is in the engine: every replica counts it now
            try:
                if legacy is not None:  # now the new volume's root belongs to the sandbox user
                    await self._migrate(legacy, mount.source, image)
                await self.backend.start(ref)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self.backend.remove(ref, force=True)
                raise
        finally:
            self.registry.unreserve(identity.owner)
            with anyio.CancelScope(shield=True):
                await slot.aclose()
        now = self.registry.clock()
        self.registry.put(
            TrackedSandbox(
                ref=ref.model_copy(update={"status": SandboxState.RUNNING}),
                owner=identity.owner,
                assistant_id=identity.assistant_id,
                lifecycle=identity.lifecycle,
                config_hash=digest,
                idle_timeout=idle,
                max_lifetime=lifetime,
                stop_timeout=grace,
                created_at=now,
                last_used=now,
            )
        )
        log.info("sandbox created", sandbox=identity.name, image=image)
        return ref

    def isolates(self, spec: SandboxSpec) -> bool:
        """Whether `spec`'s box gets a network of its own (an allowlist, or `Settings.isolated_networks`)."""
        return sandbox_egress(spec.computer, isolated=self.settings.isolated_networks) is not None

    def _isolate(self, create: CreateSpec, spec: SandboxSpec, gateway_port: int | None) -> CreateSpec:
        """A network of its own behind the egress proxy, when the spec or the settings ask for one.

        No `host.docker.internal` then, and the proxy variables in every process's environment.
        """
        egress = sandbox_egress(spec.computer, isolated=self.settings.isolated_networks)
        if egress is None:
            return create
        port = gateway_port or self.gateway_port
        relay = f"{self.settings.gateway_relay_host}:{port}" if port else None
        env = {**proxy_env(), **create.env}
        update = {"egress": egress, "gateway_relay": relay, "extra_hosts": {}, "env": env}
        return create.model_copy(update=update)

    async def _drop_legacy(self, identity: SandboxIdentity) -> None:
        """Remove this identity's box made under the pre-digest name (its workspace is migrated)."""
        if identity.name in self._legacy_checked:
            return
        if identity.lifecycle is Lifecycle.SESSION:
            raw = f"{identity.owner}-{identity.assistant_id}-{identity.session_id}"
        else:
            raw = f"{identity.owner}-{identity.assistant_id}.{identity.workspace_id}"
        legacy = container_name(raw)
        mine = {OWNER: identity.owner, ASSISTANT: identity.assistant_id, WORKSPACE: identity.workspace_id}
        session = identity.session_id if identity.lifecycle is Lifecycle.SESSION else None
        for ref in await self.backend.find({MANAGED: "true", SANDBOX: legacy}):
            tracked = self.registry.get(ref.name)
            if ref.name != legacy or any(ref.labels.get(k) != v for k, v in mine.items()):
                continue
            if session and session_label(ref.labels) != session:
                continue
            if tracked is not None and tracked.busy:
                continue
            log.info("sandbox renamed, replacing the box made under its old name", sandbox=identity.name)
            await self.backend.remove(ref, force=True)
            self.registry.drop(ref.name)
        self._legacy_checked.add(identity.name)

    async def _ensure_workspace(self, scope: WorkspaceScope, image: str) -> str | None:
        """The scope's volume exists (created within the owner's volume cap); returns the pre-digest
        volume to copy into it when it was created now and one exists (`legacy_volume_name`).

        Raises:
            CapacityError: the owner already has `max_workspace_volumes_per_owner` volumes.
        """
        name = scope.volume_name
        mine = {**self.extra_labels, MANAGED: "true", VOLUME: "workspace", OWNER: scope.owner}
        async with self.locks.hold(f"volumes-of:{scope.owner}"), self.locks.hold(f"volume:{name}"):
            existing = await self.backend.list_volumes(mine)
            if all(v.name != name for v in existing):
                cap = self.settings.max_workspace_volumes_per_owner
                if len(existing) >= cap:
                    raise CapacityError(f"owner {scope.owner}", cap, what="workspace volume")
            self._volume_used[name] = self.registry.clock()  # before it exists: the GC sees it in use
            created = await self.backend.ensure_volume(
                name,
                {**self.extra_labels, MANAGED: "true", **scope.labels()},
                tmpfs_bytes=self.settings.workspace_tmpfs_bytes,
            )
        legacy = legacy_volume_name(scope)
        if not created or legacy is None:
            return None
        old = await self.backend.list_volumes({**self.extra_labels, MANAGED: "true"})
        return legacy if any(v.name == legacy and VOLUME not in v.labels for v in old) else None

    async def _migrate(self, legacy: str, volume: str, image: str) -> None:
        log.info("workspace migrated from its pre-digest volume", volume=volume, legacy=legacy)
        await self.backend.copy_volume(legacy, volume, image=image, owner=(SANDBOX_UID, SANDBOX_GID))

    def volume_last_used(self, name: str) -> float:
        """Manager-clock time a workspace volume was last used (this process's start if never seen)."""
        return max(self._volume_used.get(name, self.started_at), self.started_at)

    async def _keep(self, box: TrackedSandbox, pids: tuple[int, ...]) -> None:
        """Record Cage's background processes (by pid and start time) as survivors of idle sweeps."""
        procs = await self.backend.list_processes(box.ref)
        box.survivors |= {(proc.pid, proc.start) for proc in procs if proc.pid in pids}

    async def kill_strays(self, box: TrackedSandbox, *, user: str) -> None:
        """Kill every process the turns left in an idle box (see `strays`); errors are logged."""
        killed: list[int] = []
        try:
            with anyio.move_on_after(STRAY_SECONDS):
                await self._sweep(box, user, killed)
        except SandboxError as exc:
            log.warning("could not sweep stray processes", sandbox=box.ref.name, error=str(exc))
            return
        if killed:
            log.info("stray processes killed", sandbox=box.ref.name, count=len(set(killed)))

    async def _sweep(self, box: TrackedSandbox, user: str, killed: list[int]) -> None:
        for _ in range(STRAY_ROUNDS):
            procs = await self.backend.list_processes(box.ref)
            box.survivors &= {(proc.pid, proc.start) for proc in procs}
            targets = stray_pids(procs, survivors=box.survivors, resident=box.resident)
            if not targets:
                return
            await self.backend.kill_processes(box.ref, targets, user=user)
            killed.extend(targets)

    async def _after_turn(self, name: str, *, remove: bool) -> None:
        box = self.registry.get(name)
        if box is None:
            return
        box.busy = max(0, box.busy - 1)
        box.last_used = self.registry.clock()
        if remove and not box.busy:
            await self.backend.remove(box.ref, force=True)  # on failure it stays tracked: the reaper retries
            self.registry.drop(name)


def _age(created: datetime | None) -> float:
    if created is None:
        return 0.0
    return max(0.0, (datetime.now(UTC) - created).total_seconds())
