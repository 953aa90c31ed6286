"""Runner mode: one turn of a sandbox assistant — acquire, bridge the runner, remember, release."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from orchestrator.dsl import AppLoader, Assistant, ConnectorSpec
from orchestrator.dsl.option_support import cli_connector, cli_runner_options, refuse_options
from orchestrator.errors import ConfigError
from orchestrator.gateway import ModelGateway, SandboxAccess
from orchestrator.permissions import PermissionGate
from orchestrator.pipeline.bridge import BridgeResult, StopReason, TurnLimits, run_runner_turn
from orchestrator.pipeline.child_sessions import StoreChildSessions
from orchestrator.pipeline.egress_events import egress_events
from orchestrator.pipeline.loop_watch import LoopWatchdog, stopped_outcome
from orchestrator.pipeline.resume import ResumeStore
from orchestrator.pipeline.roles import role_models
from orchestrator.pipeline.sandbox_tools import LeaseToolSandbox
from orchestrator.pipeline.skills import deliver_skills
from orchestrator.pipeline.vision_fallback import native_prompt, role_connector
from orchestrator.sandbox.backend import ExecHandle, ExecSpec, FileEntry
from orchestrator.sandbox.images import BuildProgress
from orchestrator.sandbox.limits import SANDBOX_USER
from orchestrator.sandbox.manager import ReleaseOutcome, SandboxLease, SandboxManager, SandboxRequest
from orchestrator.stream import Emit, SandboxPhase, TurnBuilder
from runners.base import HOME_SUBDIR, STATE_SUBDIR, ImagePart, RunnerAdapter, TurnRequest
from runners.loop_adapter import LoopAdapter, LoopTurn
from runners.registry import adapter_for


class LeasedSandbox:
    """`TurnSandbox` over a manager lease: execs run as the lease's user with its env.

    Runners ask for the image's `sandbox` user; when the lease has another one (CI mode: the
    checkout's owner), that is who the CLI runs as and who owns the files written for it.
    """

    def __init__(self, manager: SandboxManager, lease: SandboxLease) -> None:
        self.manager = manager
        self.lease = lease

    async def exec(self, spec: ExecSpec) -> ExecHandle:
        if spec.user == SANDBOX_USER:
            spec = spec.model_copy(update={"user": self.lease.user})
        return await self.manager.exec(self.lease, spec)

    async def put_files(self, dest_dir: str, files: Sequence[FileEntry]) -> None:
        owned = [f.model_copy(update={"uid": self.lease.uid, "gid": self.lease.gid}) for f in files]
        await self.manager.backend.put_files(self.lease.ref, dest_dir, owned)


def system_prompt(assistant: Assistant) -> str:
    """The assistant's system prompts, joined in order."""
    return "\n\n".join(p.content for p in assistant.prompts if p.role == "system" and p.content)


def runner_connector(assistant: Assistant, loader: AppLoader) -> ConnectorSpec | None:
    """The connector the runner drives: `runner.connectors.default` (with `override: force`, the
    default; with `override: user` only when the assistant's package names none: a request's
    `connector` option does not reach runners), else the assistant's.

    Raises:
        ConfigError: the connector is defined but unusable (e.g. its `$ENV` key is unset).
    """
    spec = assistant.sandbox
    role = spec.runner.connectors.get("default") if spec else None
    forced = role is not None and (role.override == "force" or not assistant.connector)
    conn_id = role.connector if role is not None and forced else assistant.connector
    if not conn_id:
        return None
    return loader.connector(conn_id)


@dataclass(frozen=True)
class RunnerTurnInput:
    assistant: Assistant
    prompt: str
    owner: str
    chat_id: str
    turn_id: str
    workspace_id: str | None = None
    host_workspace: Path | None = None
    """CI mode: bind-mount this host directory as the workspace."""
    gateway_port: int | None = None
    """The running model gateway's port (an isolated box reaches it through the egress relay)."""
    gate: PermissionGate | None = None
    """The call's permission broker (`sandbox.yao` `permissions`); runners ask it before a tool runs."""
    images: tuple[ImagePart, ...] = ()
    """Attached images, for a runner whose CLI takes them (the files are in the box either way)."""
    child_sessions: StoreChildSessions | None = None
    """Where the native loop's sub-agents get their persisted child sessions (yaocode)."""


def sandbox_request(inp: RunnerTurnInput) -> SandboxRequest:
    """The manager request for the assistant's sandbox.

    Raises:
        ConfigError: the assistant has no sandbox.yao.
    """
    assistant = inp.assistant
    if assistant.sandbox is None:
        raise ConfigError("assistant has no sandbox.yao", file=assistant.file("sandbox.yao"))
    return SandboxRequest(
        owner=inp.owner,
        assistant_id=assistant.id,
        assistant_dir=assistant.path,
        spec=assistant.sandbox,
        chat_id=inp.chat_id,
        workspace_id=inp.workspace_id,
        mcp_servers=tuple(
            m.model_dump(mode="json", exclude={"env", "headers"}) for m in assistant.mcp_servers
        ),
        skills={s.name: s.digest for s in assistant.skills},
        host_workspace=inp.host_workspace,
        gateway_port=inp.gateway_port,
    )


async def acquire_sandbox(
    inp: RunnerTurnInput, *, manager: SandboxManager, builder: TurnBuilder, emit: Emit
) -> SandboxLease:
    """Acquire the assistant's sandbox, reporting image builds and readiness as `sandbox/status`.

    Raises:
        ConfigError, SandboxError, ImageBuildError, PrepareError, CapacityError.
    """
    request = sandbox_request(inp)
    await emit(builder.sandbox_status("creating", f"preparing the {request.spec.runner.name} sandbox"))

    async def on_progress(progress: BuildProgress) -> None:
        if progress.phase in ("building", "step", "error"):
            phase: SandboxPhase = "failed" if progress.phase == "error" else "building"
            await emit(builder.sandbox_status(phase, progress.message or progress.tag))

    lease = await manager.acquire(request, on_progress=on_progress)
    await emit(builder.sandbox_status("ready", lease.identity.name, sandbox_id=lease.identity.name))
    return lease


def release_outcome(status: str) -> ReleaseOutcome:
    return {"completed": ReleaseOutcome.OK, "cancelled": ReleaseOutcome.CANCELLED}.get(
        status, ReleaseOutcome.ERROR
    )


def turn_limits(inp: RunnerTurnInput) -> TurnLimits:
    """`turn_timeout` and `stall_timeout` from sandbox.yao."""
    spec = inp.assistant.sandbox
    if spec is None:
        return TurnLimits()
    return TurnLimits(
        turn_timeout=spec.turn_timeout.total_seconds() if spec.turn_timeout else None,
        stall_timeout=spec.stall_timeout.total_seconds() if spec.stall_timeout else None,
    )


async def run_in_lease(
    inp: RunnerTurnInput,
    lease: SandboxLease,
    *,
    loader: AppLoader,
    manager: SandboxManager,
    gateway: ModelGateway,
    resume: ResumeStore,
    builder: TurnBuilder,
    emit: Emit,
    cancel: anyio.Event | None = None,
    limits: TurnLimits | None = None,
) -> BridgeResult:
    """One CLI-runner turn in an acquired sandbox; stores the runner's resume state as it appears.

    The CLI never sees the connector's key or the HTTP MCP servers' headers: it gets a token of
    this turn and URLs at the model gateway, which adds them outside the box. The token is
    revoked when the turn ends, whatever the CLI or its children still hold.

    Raises:
        ConfigError: the connector is unusable. SandboxError: the exec could not run.
        GatewayError: the gateway could not start.
    """
    assistant = inp.assistant
    spec = assistant.sandbox
    assert spec is not None, "run_in_lease needs a sandbox assistant"
    adapter = adapter_for(spec.runner.name)
    if isinstance(adapter, LoopAdapter):  # the loop runs here; only its tools run in the sandbox
        async with egress_events(manager, lease, builder, emit):
            return await _run_loop(
                adapter,
                inp,
                lease,
                loader=loader,
                manager=manager,
                resume=resume,
                builder=builder,
                emit=emit,
                cancel=cancel,
                limits=limits or turn_limits(inp),
            )
    connector = runner_connector(assistant, loader)
    roles = role_models(assistant, loader, connector)
    access = await gateway.grant(
        sandbox=lease.identity.name,
        owner=inp.owner,
        assistant_id=assistant.id,
        turn_id=inp.turn_id,
        connector=connector,
        # Yao `process` servers run host-side scripts; agent CLIs get network servers only.
        mcp_servers=tuple(s for s in assistant.mcp_servers if s.transport != "process"),
        isolated=lease.isolated,
    )
    try:
        async with egress_events(manager, lease, builder, emit):
            return await _run_cli(adapter, inp, lease, access, manager=manager, resume=resume,
                                  builder=builder, emit=emit, cancel=cancel, limits=limits, roles=roles)
    finally:
        gateway.revoke(access)


async def _run_cli(
    adapter: RunnerAdapter,
    inp: RunnerTurnInput,
    lease: SandboxLease,
    access: SandboxAccess,
    *,
    manager: SandboxManager,
    resume: ResumeStore,
    builder: TurnBuilder,
    emit: Emit,
    cancel: anyio.Event | None,
    limits: TurnLimits | None,
    roles: dict[str, str] | None = None,
) -> BridgeResult:
    assistant = inp.assistant
    spec = assistant.sandbox
    assert spec is not None
    connector = access.connector
    provider = connector.type.value if connector is not None else None
    refuse_options(assistant.file("package.yao"), assistant.package, adapter.name, provider)
    if connector is not None:
        connector = cli_connector(connector, assistant.package.options, adapter.name)
    mount = lease.mount_path.rstrip("/")
    turn = TurnRequest(
        assistant_id=assistant.id,
        owner=inp.owner,
        chat_id=inp.chat_id,
        turn_id=inp.turn_id,
        prompt=inp.prompt,
        images=inp.images if adapter.supports.images else (),
        system_prompt=system_prompt(assistant),
        connector=connector,
        role_models=roles or {},
        mcp_servers=access.mcp_servers,
        options=cli_runner_options(spec.runner.options, assistant.package.options, adapter.name),
        package_options=assistant.package.options,
        compaction=assistant.package.compaction,
        max_turn=assistant.mcp_options.max_turn if "max_turn" in assistant.mcp_options.model_fields_set
        else None,
        workdir=lease.work_dir,
        home=f"{mount}/{HOME_SUBDIR}",
        state_dir=f"{mount}/{STATE_SUBDIR}",
        resume=await resume.get(assistant.id, inp.chat_id, adapter.name),
        environment=dict(spec.environment),
        model_url=connector.base_url if connector is not None else None,
        lifecycle=spec.lifecycle.value,
    )

    async def save_resume(state: dict[str, str]) -> None:
        await resume.put(assistant.id, inp.chat_id, adapter.name, state)

    sandbox = LeasedSandbox(manager, lease)
    await deliver_skills(
        sandbox,
        adapter.name,
        assistant.skills,
        home=turn.home,
        state_dir=turn.state_dir,
        workspace_root=mount,
    )
    return await run_runner_turn(
        adapter,
        turn,
        sandbox,
        builder,
        emit,
        cancel=cancel,
        limits=limits or turn_limits(inp),
        workspace_root=mount,
        on_resume=save_resume,
        gate=inp.gate,
    )


async def _run_loop(
    adapter: LoopAdapter,
    inp: RunnerTurnInput,
    lease: SandboxLease,
    *,
    loader: AppLoader,
    manager: SandboxManager,
    resume: ResumeStore,
    builder: TurnBuilder,
    emit: Emit,
    cancel: anyio.Event | None,
    limits: TurnLimits,
) -> BridgeResult:
    """One loop-runner turn: the prompt, skills and the box's tools prepared here, the loop run
    by the adapter under the watchdog; the resume state stored when the turn completed.

    Raises:
        ConfigError: the assistant has no usable connector, or bad `runner.options`.
    """
    assistant = inp.assistant
    connector = runner_connector(assistant, loader)
    if connector is None:
        raise ConfigError(f"the {adapter.name} runner needs a connector", file=assistant.file("package.yao"))
    light = await anyio.to_thread.run_sync(role_connector, assistant, loader, "light")
    vision = await anyio.to_thread.run_sync(role_connector, assistant, loader, "vision")
    prompt = await native_prompt(
        inp.prompt,
        inp.images,
        connector=connector,
        assistant=assistant,
        loader=loader,
        session_id=inp.chat_id,
        vision=vision,
    )
    mount = lease.mount_path.rstrip("/")
    skills_root = await deliver_skills(
        LeasedSandbox(manager, lease),
        adapter.name,
        assistant.skills,
        home=f"{mount}/{HOME_SUBDIR}",
        state_dir=f"{mount}/{STATE_SUBDIR}",
        workspace_root=mount,
    )
    # the loop's MCP stack (the mcp SDK) loads with the loop turn, never for a CLI runner's turn
    from orchestrator.pipeline.sandbox_mcp import sandbox_stdio

    turn = LoopTurn(
        assistant=assistant,
        chat_id=inp.chat_id,
        turn_id=inp.turn_id,
        prompt=prompt,
        system=system_prompt(assistant),
        connector=connector,
        tools=LeaseToolSandbox(manager, lease),
        stdio=sandbox_stdio(manager, lease),
        state_dir=manager.settings.data_dir / adapter.name,
        light=light,
        skills_root=skills_root,
        resume=await resume.get(assistant.id, inp.chat_id, adapter.name),
        gate=inp.gate,
        child_sessions=inp.child_sessions,
    )
    watch = LoopWatchdog(emit, builder, limits, cancel or anyio.Event(), inp.gate)
    run = await adapter.run(turn, builder, emit, watch)
    outcome = stopped_outcome(run.outcome, watch.reason, limits)
    if outcome.error is not None and watch.reason in (StopReason.TIMEOUT, StopReason.STALLED):
        await emit(builder.error(outcome.error, f"turn_{watch.reason.value}"))
    resume_state: dict[str, str] = {}
    if outcome.status == "completed" and run.resume_state:
        resume_state = dict(run.resume_state)
        await resume.put(assistant.id, inp.chat_id, adapter.name, resume_state)
    return BridgeResult(outcome, exit_code=None, stopped=watch.reason, resume_state=resume_state)


def new_chat_id() -> str:
    return f"chat-{uuid.uuid4().hex[:12]}"
