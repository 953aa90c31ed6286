"""Runner mode: a sandbox assistant's agent runs against its acquired box. A CLI runner goes
through the bridge; a loop runner (`yaocode`) runs Cage's loop here, with only its tools in the box.

The path is chosen by the adapter's type (`RunnerAdapter` or `LoopAdapter`), never by its name.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from orchestrator.dsl import AppLoader, Assistant, ConnectorSpec
from orchestrator.dsl.option_support import cli_connector, cli_runner_options, refuse_options
from orchestrator.errors import ConfigError
from orchestrator.gateway import SandboxAccess
from orchestrator.pipeline.attachments import image_parts, with_attachment_note
from orchestrator.pipeline.call import Call
from orchestrator.pipeline.call_result import CallResult
from orchestrator.pipeline.contract import last_user_text
from orchestrator.pipeline.modes.bridge import run_runner_turn
from orchestrator.pipeline.modes.child_sessions import StoreChildSessions
from orchestrator.pipeline.modes.egress_events import egress_events
from orchestrator.pipeline.modes.roles import role_models
from orchestrator.pipeline.modes.sandbox_tools import LeaseToolSandbox
from orchestrator.pipeline.modes.skills import deliver_skills
from orchestrator.pipeline.modes.vision_fallback import native_prompt, role_connector
from orchestrator.pipeline.options import tightened
from orchestrator.pipeline.watchdog import StopReason, TurnLimits, WatchedLoop, cut_short
from orchestrator.sandbox.backend import ExecHandle, ExecSpec, FileEntry
from orchestrator.sandbox.limits import SANDBOX_USER
from orchestrator.sandbox.manager import SandboxLease, SandboxManager
from runners.base import HOME_SUBDIR, STATE_SUBDIR, ImagePart, RunnerAdapter, TurnOutcome, TurnRequest
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
        if spec.files:
            spec = spec.model_copy(update={"files": tuple(self._owned(spec.files))})
        return await self.manager.exec(self.lease, spec)

    async def put_files(self, dest_dir: str, files: Sequence[FileEntry]) -> None:
        await self.manager.backend.put_files(self.lease.ref, dest_dir, self._owned(files))

    def _owned(self, files: Sequence[FileEntry]) -> list[FileEntry]:
        return [f.model_copy(update={"uid": self.lease.uid, "gid": self.lease.gid}) for f in files]


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


def turn_limits(assistant: Assistant, asked: float | None = None) -> TurnLimits:
    """`turn_timeout` and `stall_timeout` from sandbox.yao; a request's `turn_timeout` may shorten
    the turn's, never lengthen it."""
    spec = assistant.sandbox
    if spec is None:
        return TurnLimits(turn_timeout=asked)
    configured = spec.turn_timeout.total_seconds() if spec.turn_timeout else None
    return TurnLimits(
        turn_timeout=tightened(asked, configured),
        stall_timeout=spec.stall_timeout.total_seconds() if spec.stall_timeout else None,
    )


class RunnerMode:
    """Runs the call's runner in its sandbox (acquired by the sandbox stage)."""

    completes = True

    async def run(self, call: Call) -> CallResult:
        """One runner turn; the runner's resume state is stored as it appears.

        Raises:
            ConfigError: the connector is unusable or `runner.options` are bad.
            SandboxError: the exec could not run. GatewayError: the gateway could not start.
        """
        lease, scope = call.lease, call.scope
        assert lease is not None, "the sandbox is acquired before the mode runs"
        spec = call.assistant.sandbox
        assert spec is not None, "runner mode needs a sandbox assistant"
        if scope.permissions is not None:
            call.gate = await scope.permissions.broker(
                spec.permissions,
                session_id=scope.session_id,
                turn_id=scope.turn_id,
                builder=call.builder,
                emit=call.emit,
                workspace=lease.work_dir,
            )
        call.stage = "runner"
        adapter = adapter_for(spec.runner.name)
        if isinstance(adapter, LoopAdapter):  # the loop runs here; only its tools run in the sandbox
            async with egress_events(scope.manager, lease, call.builder, call.emit):
                outcome = await _run_loop(adapter, call)
        else:
            outcome = await _run_cli(adapter, call)
        return call.result(
            outcome.status,
            error=outcome.error,
            stop_reason=outcome.stop_reason,
            usage=outcome.usage or call.builder.turn_usage,
        )


def _assistant(call: Call) -> Assistant:
    """The call's assistant, with the connector a request (or its Create hook) asked for."""
    if call.options.connector:
        return call.assistant.model_copy(update={"connector": call.options.connector})
    return call.assistant


def _prompt(call: Call, lease: SandboxLease) -> tuple[str, tuple[ImagePart, ...]]:
    """What the runner is prompted with: the last user message, noting the root's attachments
    (and those that are images, for a runner that takes them)."""
    attached = call.scope.attachments if call.stack.kind == "root" else ()
    prompt = with_attachment_note(last_user_text(call.messages), attached, lease.work_dir)
    return prompt, image_parts(attached, lease.work_dir)


async def _run_cli(adapter: RunnerAdapter, call: Call) -> TurnOutcome:
    """One CLI-runner turn through the bridge.

    The CLI never sees the connector's key or the HTTP MCP servers' headers: it gets a token of
    this turn and URLs at the model gateway, which adds them outside the box. The token is
    revoked when the turn ends, whatever the CLI or its children still hold.
    """
    scope, lease, assistant = call.scope, call.lease, _assistant(call)
    assert lease is not None
    connector = runner_connector(assistant, scope.loader)
    roles = role_models(assistant, scope.loader, connector)
    access = await scope.gateway.grant(
        sandbox=lease.identity.name,
        owner=scope.owner,
        assistant_id=assistant.id,
        turn_id=scope.turn_id,
        connector=connector,
        # Yao `process` servers run host-side scripts; agent CLIs get network servers only.
        mcp_servers=tuple(s for s in assistant.mcp_servers if s.transport != "process"),
        isolated=lease.isolated,
    )
    try:
        async with egress_events(scope.manager, lease, call.builder, call.emit):
            return await _bridge(adapter, call, assistant, lease, access, roles)
    finally:
        scope.gateway.revoke(access)


async def _bridge(
    adapter: RunnerAdapter,
    call: Call,
    assistant: Assistant,
    lease: SandboxLease,
    access: SandboxAccess,
    roles: dict[str, str],
) -> TurnOutcome:
    scope = call.scope
    prompt, images = _prompt(call, lease)
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
        owner=scope.owner,
        session_id=scope.session_id,
        turn_id=scope.turn_id,
        prompt=prompt,
        images=images if adapter.supports.images else (),
        system_prompt=system_prompt(assistant),
        connector=connector,
        role_models=roles,
        mcp_servers=access.mcp_servers,
        options=cli_runner_options(spec.runner.options, assistant.package.options, adapter.name),
        package_options=assistant.package.options,
        compaction=assistant.package.compaction,
        max_turn=assistant.mcp_options.max_turn
        if "max_turn" in assistant.mcp_options.model_fields_set
        else None,
        workdir=lease.work_dir,
        home=f"{mount}/{HOME_SUBDIR}",
        state_dir=f"{mount}/{STATE_SUBDIR}",
        resume=await scope.resume.get(assistant.id, scope.session_id, adapter.name),
        environment=dict(spec.environment),
        model_url=connector.base_url if connector is not None else None,
        lifecycle=spec.lifecycle.value,
    )

    async def save_resume(state: dict[str, str]) -> None:
        await scope.resume.put(assistant.id, scope.session_id, adapter.name, state)

    sandbox = LeasedSandbox(scope.manager, lease)
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
        call.builder,
        call.emit,
        cancel=call.signal.requested,
        limits=turn_limits(assistant, call.options.turn_timeout),
        workspace_root=mount,
        on_resume=save_resume,
        gate=call.gate,
    )


async def _run_loop(adapter: LoopAdapter, call: Call) -> TurnOutcome:
    """One loop-runner turn: the prompt, skills and the box's tools prepared here, the loop run
    by the adapter under the watchdog; the resume state stored when the turn completed.

    Raises:
        ConfigError: the assistant has no usable connector, or bad `runner.options`.
    """
    scope, lease, builder, emit = call.scope, call.lease, call.builder, call.emit
    assert lease is not None
    assistant, gate = _assistant(call), call.gate
    limits = turn_limits(assistant, call.options.turn_timeout)
    loader, manager, resume = scope.loader, scope.manager, scope.resume
    connector = runner_connector(assistant, loader)
    if connector is None:
        raise ConfigError(f"the {adapter.name} runner needs a connector", file=assistant.file("package.yao"))
    light = await anyio.to_thread.run_sync(role_connector, assistant, loader, "light")
    vision = await anyio.to_thread.run_sync(role_connector, assistant, loader, "vision")
    prompt, images = _prompt(call, lease)
    message = await native_prompt(
        prompt,
        images,
        connector=connector,
        assistant=assistant,
        loader=loader,
        session_id=scope.session_id,
        vision=vision,
        connections=scope.connections,
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
    from orchestrator.pipeline.modes.sandbox_mcp import sandbox_stdio

    turn = LoopTurn(
        assistant=assistant,
        session_id=scope.session_id,
        turn_id=scope.turn_id,
        prompt=message,
        system=system_prompt(assistant),
        connector=connector,
        tools=LeaseToolSandbox(manager, lease),
        stdio=sandbox_stdio(manager, lease),
        state_dir=manager.settings.data_dir / adapter.name,
        light=light,
        skills_root=skills_root,
        resume=await resume.get(assistant.id, scope.session_id, adapter.name),
        gate=gate,
        child_sessions=StoreChildSessions(
            scope.store,
            owner=scope.owner,
            assistant_id=assistant.id,
            parent_session_id=scope.session_id,
            turn_id=scope.turn_id,
        ),
    )
    watch = WatchedLoop(emit, builder, limits, call.signal.requested, gate)
    run = await adapter.run(turn, builder, emit, watch)
    outcome = cut_short(run.outcome, watch.reason, limits, "agent loop stalled: no events")
    if outcome.error is not None and watch.reason in (StopReason.TIMEOUT, StopReason.STALLED):
        await emit(builder.error(outcome.error, f"turn_{watch.reason.value}"))
    if outcome.status == "completed" and run.resume_state:
        await resume.put(assistant.id, scope.session_id, adapter.name, dict(run.resume_state))
    return outcome
