"""`SandboxService`: sandboxes as the API sees them (`/v1/sandboxes`, `/v1/admin/sandboxes`): the
manager's tracked boxes, with owner checks, exec, stop, remove and an on-demand reaper sweep."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.api.auth import Principal
from orchestrator.errors import Conflict, SandboxNotFound
from orchestrator.redaction import redact
from orchestrator.sandbox import ExecSpec, Reaper, ResourceUsage, SandboxManager
from orchestrator.sandbox.completion import run_to_end
from orchestrator.sandbox.registry import TrackedSandbox
from orchestrator.store import Store

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class SandboxView(BaseModel):
    model_config = _FROZEN
    name: str
    id: str
    owner: str
    assistant_id: str
    lifecycle: str
    config_hash: str
    status: str
    """`busy` (a turn runs in it), `idle`, or `stopped`."""
    busy_turns: int
    idle_seconds: float
    age_seconds: float
    idle_timeout: float | None
    max_lifetime: float | None
    image: str | None = None
    usage: ResourceUsage | None = None
    """Memory and process count, from the engine (`get`, or `list?usage=true`)."""


class ExecRequest(BaseModel):
    model_config = _FROZEN
    argv: list[str] = Field(min_length=1, max_length=256)
    env: dict[str, str] = Field(default_factory=dict)
    user: str = ""
    """Empty: the sandbox user."""
    workdir: str = ""
    stdin: str | None = None
    timeout: float | None = Field(default=None, gt=0, le=3600)
    """Seconds; default `CAGE_EXEC_TIMEOUT`."""


class ExecResult(BaseModel):
    model_config = _FROZEN
    exit_code: int | None
    """None when the command was killed at the time limit."""
    stdout: str
    stderr: str
    truncated: bool
    timed_out: bool


class ReapedSandbox(BaseModel):
    model_config = _FROZEN
    name: str
    action: str


def _view(box: TrackedSandbox, now: float) -> SandboxView:
    return SandboxView(
        name=box.ref.name,
        id=box.ref.id,
        owner=box.owner,
        assistant_id=box.assistant_id,
        lifecycle=box.lifecycle.value,
        config_hash=box.config_hash,
        status="stopped" if box.stopped else "busy" if box.busy else "idle",
        busy_turns=box.busy,
        idle_seconds=round(box.idle_for(now), 3),
        age_seconds=round(now - box.created_at, 3),
        idle_timeout=box.idle_timeout,
        max_lifetime=box.max_lifetime,
    )


class SandboxService:
    """The caller's sandboxes (an admin's: everyone's) through the manager, every change audited."""

    def __init__(
        self, manager: SandboxManager, store: Store, *, exec_timeout: float, output_bytes: int
    ) -> None:
        self._manager = manager
        self._store = store
        self._exec_timeout = exec_timeout
        self._output_bytes = output_bytes

    def _box(self, principal: Principal, name: str) -> TrackedSandbox:
        box = self._manager.registry.get(name)
        if box is None or (not principal.is_admin and box.owner != principal.owner):
            raise SandboxNotFound(name)
        return box

    async def _detailed(self, box: TrackedSandbox) -> SandboxView:
        view = _view(box, self._manager.registry.clock())
        try:
            info = await self._manager.backend.inspect(box.ref.id)
        except SandboxNotFound:
            return view
        return view.model_copy(update={"image": info.image, "usage": info.usage})

    async def views(
        self, principal: Principal, *, owner: str | None = None, usage: bool = False
    ) -> list[SandboxView]:
        """The caller's sandboxes; an admin sees all, or one owner's."""
        target = owner if principal.is_admin else principal.owner
        boxes = sorted(
            (b for b in self._manager.registry.all() if target is None or b.owner == target),
            key=lambda b: b.ref.name,
        )
        if usage:
            return [await self._detailed(b) for b in boxes]
        now = self._manager.registry.clock()
        return [_view(b, now) for b in boxes]

    async def get(self, principal: Principal, name: str) -> SandboxView:
        """Raises: SandboxNotFound (missing, or another owner's)."""
        return await self._detailed(self._box(principal, name))

    async def exec(self, principal: Principal, name: str, request: ExecRequest) -> ExecResult:
        """Run a command in the sandbox; stdout is cut at the output cap, the run at the time limit."""
        box = self._box(principal, name)
        spec = ExecSpec(
            argv=tuple(request.argv),
            env=request.env,
            user=request.user,
            workdir=request.workdir,
            stdin=request.stdin.encode() if request.stdin is not None else None,
        )
        async with await self._manager.backend.exec(box.ref, spec) as handle:
            done = await run_to_end(
                handle, timeout=request.timeout or self._exec_timeout, max_output=self._output_bytes
            )
        await self._store.audit.record(principal.key_id, "sandbox.exec", name, {"argv0": request.argv[0]})
        return ExecResult(
            exit_code=done.exit_code,
            stdout=redact(done.stdout.removesuffix(b"\n").decode(errors="replace")),
            stderr=redact(done.stderr.decode(errors="replace")),
            truncated=done.truncated,
            timed_out=done.timed_out,
        )

    async def stop(self, principal: Principal, name: str) -> SandboxView:
        """Raises: SandboxNotFound, Conflict (a turn runs in it)."""
        self._box(principal, name)
        if not await self._manager.retire(name, remove=False, still=lambda b: not b.stopped):
            box = self._box(principal, name)
            if box.busy:
                raise Conflict(f"sandbox {name} is running a turn; cancel the turn first")
        await self._store.audit.record(principal.key_id, "sandbox.stop", name)
        return await self.get(principal, name)

    async def remove(self, principal: Principal, name: str) -> None:
        """Raises: SandboxNotFound, Conflict (a turn runs in it)."""
        self._box(principal, name)
        removed = await self._manager.retire(name, remove=True, still=lambda b: True)
        if not removed and self._manager.registry.get(name) is not None:
            raise Conflict(f"sandbox {name} is running a turn; cancel the turn first")
        await self._store.audit.record(principal.key_id, "sandbox.remove", name)

    async def gc(self, principal: Principal) -> list[ReapedSandbox]:
        """One reaper sweep now: idle boxes past their timeouts are stopped or removed."""
        done = await Reaper(self._manager).sweep()
        await self._store.audit.record(principal.key_id, "sandbox.gc", "*", {"reaped": len(done)})
        return [ReapedSandbox(name=n, action=a.value) for n, a in done]

    async def images_in_use(self) -> set[str]:
        """Image references of every tracked sandbox (a prune must keep them)."""
        used: set[str] = set()
        for box in self._manager.registry.all():
            try:
                used.add((await self._manager.backend.inspect(box.ref.id)).image)
            except SandboxNotFound:
                continue
        return used
