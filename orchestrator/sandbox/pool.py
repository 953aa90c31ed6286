"""Warm pool: started boxes made ahead, so an owner's next `oneshot` turn claims one at once.

What a pooled box is. An engine fixes a container's mounts and labels when it is created: the
owner's workspace cannot be attached to a running box, nor its labels rewritten. So a pooled box
is made *for* one key, `PoolKey` = (owner, assistant, workspace scope, config hash): it is the box
that owner's next cold `oneshot` turn would have created (same image, limits, network policy,
environment, the owner's own workspace volume, every `cage.*` label but the session), made after that
owner's previous turn, started, then paused. It carries nothing of anyone else: no other owner's
workspace, no secret (secrets reach execs only, at the turn), no process but its idle main process,
and no file a turn wrote (a claimed box is never pooled again: `oneshot` boxes are removed at
release). A pool key never matches another owner, another assistant, another workspace or another
config hash; `cage run` (CI mode, a bind-mounted checkout) never pools.

Claiming is one atomic engine operation: `unpause`. The engine checks and clears the paused state
under the container's lock, so of two claimers (two coroutines, or two orchestrator processes on one
engine) exactly one gets the box and the other goes on to the next box or a cold create. The same
fence guards removal: the reaper, eviction and shutdown first claim a pooled box, then remove it,
so nothing removes a box another process has just claimed.

Bounds: pooled boxes sit in the manager's registry, so they count against `max_sandboxes` and
`max_sandboxes_per_owner`; a cold create that would pass a cap evicts an unclaimed pooled box
first. At most `Settings.pool_max` wait at once; one unclaimed for `Settings.pool_idle` seconds,
or whose key's config hash changed, is removed. Shutdown removes the pool; a restart's reconcile
removes any left behind (they are `oneshot` boxes).
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Protocol, runtime_checkable

import anyio
import structlog
from pydantic import BaseModel, ConfigDict

from orchestrator.dsl.sandbox import Lifecycle, SandboxSpec
from orchestrator.errors import CageError, CapacityError, SandboxError
from orchestrator.redaction import redact
from orchestrator.sandbox.backend import CreateSpec, SandboxBackend, SandboxRef, SandboxState
from orchestrator.sandbox.identity import identity_key
from orchestrator.sandbox.labels import MANAGED, SANDBOX, SESSION, SandboxLabels
from orchestrator.sandbox.registry import SandboxRegistry, TrackedSandbox
from orchestrator.settings import Settings
from orchestrator.spawn import Spawn

log = structlog.get_logger(__name__)
POOL = "cage.pool"
"""Label of a box made for a warm pool: its `PoolKey.digest` (it stays on the box once claimed)."""
POOL_NAME_HEX = 8
"""Random bytes (hex) in a pooled box's name, as in a cold `oneshot` box's (`cage-<hex>`)."""

PAUSE_TRIES = 3
PAUSE_BACKOFF = 0.5
"""Seconds before the second pause of a new box (twice that before the third)."""


@runtime_checkable
class PausingBackend(Protocol):
    """A backend that can freeze a running box and thaw it atomically (the claim)."""

    async def pause(self, ref: SandboxRef) -> None: ...

    async def unpause(self, ref: SandboxRef) -> None:
        """Raises `SandboxError` when the box is not paused (claimed by someone else) or gone."""
        ...


class PoolKey(BaseModel):
    """What a pooled box is made for: one owner's workspace under one config hash."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    owner: str
    assistant_id: str
    workspace_id: str
    shared_workspace: bool
    config_hash: str

    @property
    def scope(self) -> tuple[str, str, str, bool]:
        """The key without its config hash: a new hash makes the scope's old pooled boxes stale."""
        return (self.owner, self.assistant_id, self.workspace_id, self.shared_workspace)

    @property
    def digest(self) -> str:
        """The `cage.pool` label value: a digest of the whole key (ids are validated, NUL-free)."""
        shared = "shared" if self.shared_workspace else "default"
        raw = identity_key("pool", self.owner, self.assistant_id, shared, self.workspace_id, self.config_hash)
        return hashlib.sha256(raw).hexdigest()[:24]


def pool_size(spec: SandboxSpec, settings: Settings) -> int:
    """Boxes to keep warm for `spec`: its `pool.size`, else `CAGE_POOL_SIZE`; 0 unless `oneshot`."""
    if spec.lifecycle is not Lifecycle.ONESHOT:
        return 0
    return spec.pool.size if spec.pool is not None else settings.pool_size


class WarmPool:
    """The pooled boxes of one manager (see the module docstring). Made by `SandboxManager.start_pool`."""

    def __init__(
        self,
        backend: SandboxBackend,
        pausing: PausingBackend,
        registry: SandboxRegistry,
        settings: Settings,
        *,
        extra_labels: dict[str, str],
        spawn: Spawn,
    ) -> None:
        self._backend = backend
        self._pausing = pausing
        self._registry = registry
        self._settings = settings
        self._extra = extra_labels
        self._spawn = spawn
        self._templates: dict[str, CreateSpec] = {}
        """Pool key digest -> the CreateSpec of that key's last cold box (name and session replaced)."""
        self._keys: dict[str, PoolKey] = {}
        self._sizes: dict[str, int] = {}
        self._filling: set[str] = set()
        self._making = 0
        self._closed = False

    def free(self, key: PoolKey | None = None) -> list[TrackedSandbox]:
        """Unclaimed pooled boxes (of `key`), oldest first."""
        digest = None if key is None else key.digest
        boxes = [b for b in self._registry.all() if b.pool_key is not None]
        return sorted(
            (b for b in boxes if digest is None or b.pool_key == digest), key=lambda b: b.created_at
        )

    def remember(self, key: PoolKey, template: CreateSpec) -> None:
        """Keep `template` (a cold box's CreateSpec) to make `key`'s pooled boxes from."""
        self._templates[key.digest] = template
        self._keys[key.digest] = key

    def refill(self, key: PoolKey, size: int) -> None:
        """Top `key`'s pool up to `size` in the background, and drop its scope's stale boxes."""
        if self._closed:
            return
        self._sizes[key.digest] = size
        stale = [d for d, k in self._keys.items() if k.scope == key.scope and d != key.digest]
        for digest in stale:
            self._templates.pop(digest, None)
            self._keys.pop(digest, None)
            self._sizes.pop(digest, None)
        if stale:
            self._spawn(lambda: self._drop(set(stale)))
        if key.digest in self._filling or key.digest not in self._templates:
            return
        self._filling.add(key.digest)
        self._spawn(lambda: self._fill(key))

    async def claim(self, key: PoolKey) -> SandboxRef | None:
        """A running box of `key`, now this caller's; None when the pool has none (go cold)."""
        for box in self.free(key):
            if box.pool_key != key.digest:  # claimed while an earlier candidate was tried
                continue
            if await self._take(box):
                return box.ref
        return await self._claim_foreign(key)

    async def _take(self, box: TrackedSandbox) -> bool:
        """Claim a tracked pooled box by unpausing it; a lost race forgets it. True when won."""
        box.pool_key = None  # no other coroutine of this process picks it from now on
        box.busy += 1  # nor does the reaper
        try:
            await self._pausing.unpause(box.ref)
        except SandboxError as exc:
            self._registry.drop(box.ref.name)
            log.info("pooled sandbox lost to another claim", sandbox=box.ref.name, error=type(exc).__name__)
            await self._drop_if_stuck(box.ref)
            return False
        finally:
            box.busy -= 1
        box.ref = box.ref.model_copy(update={"status": SandboxState.RUNNING})
        box.last_used = self._registry.clock()
        log.info("pooled sandbox claimed", sandbox=box.ref.name)
        return True

    async def _drop_if_stuck(self, ref: SandboxRef) -> None:
        """After a failed unpause: a box still paused was not claimed by anyone (the engine could
        not thaw it), so it is removed rather than left frozen; a running or gone one is not ours."""
        try:
            info = await self._backend.inspect(ref.id)
            if info.ref.status is SandboxState.PAUSED:
                await self._backend.remove(ref, force=True)
                log.warning("pooled sandbox could not be thawed, removed", sandbox=ref.name)
        except SandboxError:
            return

    async def _claim_foreign(self, key: PoolKey) -> SandboxRef | None:
        """Claim a paused box of `key` another process made on this engine (several replicas)."""
        found = await self._backend.find({**self._extra, MANAGED: "true", POOL: key.digest})
        for ref in found:
            if ref.status is not SandboxState.PAUSED or self._registry.get(ref.name) is not None:
                continue
            labels = SandboxLabels.parse(ref.labels)
            if labels is None or labels.owner != key.owner or labels.config_hash != key.config_hash:
                continue
            try:
                await self._pausing.unpause(ref)
            except SandboxError:
                continue
            now = self._registry.clock()
            running = ref.model_copy(update={"status": SandboxState.RUNNING})
            self._registry.put(
                TrackedSandbox(
                    ref=running,
                    owner=labels.owner,
                    assistant_id=labels.assistant_id,
                    lifecycle=labels.lifecycle,
                    config_hash=labels.config_hash,
                    idle_timeout=None,
                    max_lifetime=None,
                    stop_timeout=labels.stop_timeout or 2.0,
                    created_at=now,
                    last_used=now,
                )
            )
            log.info("pooled sandbox of another process claimed", sandbox=ref.name)
            return running
        return None

    async def _fill(self, key: PoolKey) -> None:
        try:
            while not self._closed:
                template = self._templates.get(key.digest)
                want = self._sizes.get(key.digest, 0)
                if template is None or len(self.free(key)) >= want:
                    return
                if len(self.free()) + self._making >= self._settings.pool_max:
                    return
                with anyio.CancelScope(shield=True):  # a box half made is removed, not leaked
                    made = await self._make(key, template)
                if not made:
                    return
        except CageError as exc:
            log.warning(
                "warm pool refill failed",
                pool=key.digest,
                error=type(exc).__name__,
                detail=redact(str(exc))[:300],
            )
        finally:
            self._filling.discard(key.digest)

    async def _make(self, key: PoolKey, template: CreateSpec) -> bool:
        """Create, start and pause one box of `key`; False when a cap leaves no room."""
        name = f"cage-{secrets.token_hex(POOL_NAME_HEX)}"
        labels = {k: v for k, v in template.labels.items() if k != SESSION}
        labels.update({SANDBOX: name, POOL: key.digest})
        spec = template.model_copy(update={"name": name, "labels": labels})
        try:
            self._registry.reserve(key.owner)
        except CapacityError:
            log.info("warm pool not refilled: sandbox cap reached", pool=key.digest, owner=key.owner)
            return False
        self._making += 1
        try:
            ref = await self._backend.create(spec)
            try:
                await self._backend.start(ref)
                await self._pause(ref)
            except BaseException:
                await self._backend.remove(ref, force=True)
                raise
        finally:
            self._making -= 1
            self._registry.unreserve(key.owner)
        if self._closed or key.digest not in self._templates:
            await self._backend.remove(ref, force=True)
            return False
        now = self._registry.clock()
        self._registry.put(
            TrackedSandbox(
                ref=ref.model_copy(update={"status": SandboxState.PAUSED}),
                owner=key.owner,
                assistant_id=key.assistant_id,
                lifecycle=Lifecycle.ONESHOT,
                config_hash=key.config_hash,
                idle_timeout=self._settings.pool_idle,
                max_lifetime=None,
                stop_timeout=float(template.stop_timeout or 2),
                created_at=now,
                last_used=now,
                pool_key=key.digest,
            )
        )
        log.info("pooled sandbox ready", sandbox=name, pool=key.digest)
        return True

    async def _pause(self, ref: SandboxRef) -> None:
        """Pause a new box; the engine's freezer may give up under load (`unable to freeze`), so
        it is tried `PAUSE_TRIES` times."""
        for attempt in range(1, PAUSE_TRIES + 1):
            try:
                await self._pausing.pause(ref)
                return
            except SandboxError:
                if attempt == PAUSE_TRIES:
                    raise
                await anyio.sleep(PAUSE_BACKOFF * attempt)

    async def _retire(self, box: TrackedSandbox) -> bool:
        """Claim an unclaimed box, then remove it. True when it was removed here."""
        if box.pool_key is None or not await self._take(box):
            return False
        try:
            await self._backend.remove(box.ref, force=True)
        finally:
            self._registry.drop(box.ref.name)
        return True

    async def _drop(self, digests: set[str]) -> None:
        for box in self.free():
            if box.pool_key in digests:
                await self._retire(box)

    async def sweep(self) -> list[str]:
        """Remove pooled boxes unclaimed for `pool_idle` seconds or whose key went stale."""
        now = self._registry.clock()
        removed: list[str] = []
        for box in self.free():
            stale = box.pool_key not in self._keys
            if (stale or now - box.last_used > self._settings.pool_idle) and await self._retire(box):
                removed.append(box.ref.name)
        if removed:
            log.info("pooled sandboxes reaped", count=len(removed))
        return removed

    async def evict(self, owner: str) -> bool:
        """Remove one unclaimed box to make room for a cold create: `owner`'s first. True when done."""
        boxes = self.free()
        for box in sorted(boxes, key=lambda b: b.owner != owner):
            if await self._retire(box):
                log.info("pooled sandbox evicted for a cold create", sandbox=box.ref.name)
                return True
        return False

    async def close(self) -> None:
        """Stop refilling and remove every unclaimed box (server shutdown)."""
        self._closed = True
        with anyio.CancelScope(shield=True):
            for box in self.free():
                try:
                    await self._retire(box)
                except CageError as exc:
                    log.warning(
                        "pooled sandbox not removed at shutdown", sandbox=box.ref.name, error=str(exc)
                    )
