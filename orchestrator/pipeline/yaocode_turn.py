"""The `yaocode` runner: Cage's native loop in the orchestrator, every tool call in the sandbox.

The model is called from here (the connector's own URL, no container rewrite); bash, read,
write, edit, glob, grep, ls and the `agent` tool's sub-agents run inside the assistant's
container through `LeaseToolSandbox`. The turn ends like a CLI runner's (`BridgeResult`), so
callers need not care which runner ran: `stopped` says whether a cancel, the turn timeout or a
stall cut it short.

Checkpoints go to `<data_dir>/yaocode/checkpoints/<turn_id>.json` after every step, and the
run's trace (rounds, tool calls with their timing and metadata, sub-agent sessions) to
`<data_dir>/yaocode/traces/<turn_id>.json`. A completed turn is the starting point of the next
turn in the same chat (through the resume store).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import structlog

from orchestrator.dsl import AppLoader, Assistant
from orchestrator.dsl.option_support import refuse_options
from orchestrator.errors import ConfigError, ToolError
from orchestrator.llm import (
    AgentLoop,
    AgentTool,
    ChatMessage,
    JsonFileCheckpoints,
    LoopResult,
    client_for,
    compaction_policy,
    model_options,
    package_model,
)
from orchestrator.llm.mcp import McpToolset
from orchestrator.llm.subagent import SUBAGENT_SYSTEM
from orchestrator.llm.tools import coding_tools
from orchestrator.llm.tools.question import QuestionTool
from orchestrator.llm.tools.skills import SkillTool, cards, with_skills
from orchestrator.permissions import PermissionGate
from orchestrator.pipeline.bridge import BridgeResult, Emit, StopReason, TurnLimits
from orchestrator.pipeline.permissions import PermissionBroker
from orchestrator.pipeline.resume import ResumeStore
from orchestrator.pipeline.runner_turn import LeasedSandbox, RunnerTurnInput, runner_connector, system_prompt
from orchestrator.pipeline.sandbox_mcp import sandbox_stdio
from orchestrator.pipeline.sandbox_tools import LeaseToolSandbox
from orchestrator.pipeline.skills import deliver_skills
from orchestrator.pipeline.vision_fallback import native_prompt, role_connector
from orchestrator.sandbox.manager import SandboxLease, SandboxManager
from orchestrator.stream import Event, TurnBuilder
from runners.base import HOME_SUBDIR, STATE_SUBDIR, TurnOutcome
from runners.native_loop.options import NativeOptions
from runners.native_loop.outcome import loop_status, summary_events

log = structlog.get_logger(__name__)

RUNNER = "yaocode"
RESUME_KEY = "turn_id"
_TICK = 0.2


def native_dir(data_dir: Path) -> Path:
    """Where yaocode keeps its checkpoints and traces."""
    return data_dir / RUNNER


class _Watch:
    """Stops the loop on cancel, on the turn timeout, or when no event came for the stall timeout."""

    def __init__(
        self, emit: Emit, builder: TurnBuilder, limits: TurnLimits, gate: PermissionGate | None = None
    ) -> None:
        self._emit = emit
        self._gate = gate if isinstance(gate, PermissionBroker) else None
        self._builder = builder
        self._limits = limits
        self.stop = anyio.Event()
        self.reason: StopReason | None = None
        self.last_event = anyio.current_time()

    async def emit(self, events: Sequence[Event]) -> None:
        self.last_event = anyio.current_time()
        await self._emit(events)

    async def run(self, cancel: anyio.Event) -> None:
        started = anyio.current_time()
        while True:
            with anyio.move_on_after(_TICK):
                await cancel.wait()
            now = anyio.current_time()
            if self._gate is not None and self._gate.waiting:  # a request waits for a human
                self.last_event = now
            if cancel.is_set():
                self.reason = StopReason.CANCELLED
            elif self._limits.turn_timeout is not None and now - started > self._limits.turn_timeout:
                self.reason = StopReason.TIMEOUT
            elif (
                self._limits.stall_timeout is not None and now - self.last_event > self._limits.stall_timeout
            ):
                idle = int((now - self.last_event) * 1000)
                await self._emit(self._builder.stalled(idle, "no events from the agent loop"))
                self.reason = StopReason.STALLED
            if self.reason is not None:
                self.stop.set()
                return


async def _history(
    resume: ResumeStore, checkpoints: JsonFileCheckpoints, assistant_id: str, chat_id: str
) -> list[ChatMessage]:
    """The messages of the chat's last completed yaocode turn, if its checkpoint is still there."""
    state = await resume.get(assistant_id, chat_id, RUNNER)
    previous = state.get(RESUME_KEY)
    if not previous:
        return []
    checkpoint = await checkpoints.load(previous)
    if checkpoint is None:
        log.warning("yaocode.history_missing", chat_id=chat_id, turn_id=previous)
        return []
    return list(checkpoint.messages)


async def _save_trace(directory: Path, turn_id: str, result: LoopResult) -> None:
    path = anyio.Path(directory / f"{turn_id}.json")
    await anyio.Path(directory).mkdir(parents=True, exist_ok=True)
    trace = result.model_dump_json(include={"stop_reason", "rounds", "steps", "usage", "error"})
    await path.write_text(trace, encoding="utf-8")


def _outcome(result: LoopResult, reason: StopReason | None, limits: TurnLimits) -> TurnOutcome:
    status, error = loop_status(result)
    stop_reason: str = result.stop_reason
    if reason is StopReason.TIMEOUT:
        status, error, stop_reason = "error", f"turn timed out after {limits.turn_timeout:g}s", "timeout"
    elif reason is StopReason.STALLED:
        status, error = "error", f"agent loop stalled: no events for {limits.stall_timeout:g}s"
        stop_reason = "stalled"
    return TurnOutcome(status=status, error=error, stop_reason=stop_reason, usage=result.usage)


def _max_turn(assistant: Assistant) -> int | None:
    """`mcp.options.max_turn` when the package sets it."""
    options = assistant.mcp_options
    return options.max_turn if "max_turn" in options.model_fields_set else None


async def _mcp_failed(builder: TurnBuilder, emit: Emit, exc: ToolError) -> BridgeResult:
    """A server could not be started or connected: the turn would offer the model part of its
    tools, so it ends in error naming the server."""
    message = str(exc)
    log.warning("yaocode.mcp_unavailable", error=message)
    await emit(builder.error(message, "mcp_unavailable"))
    outcome = TurnOutcome(status="error", error=message, stop_reason="error")
    return BridgeResult(outcome, exit_code=None, stopped=None, resume_state={})


async def run_yaocode_turn(
    inp: RunnerTurnInput,
    lease: SandboxLease,
    *,
    loader: AppLoader,
    manager: SandboxManager,
    resume: ResumeStore,
    builder: TurnBuilder,
    emit: Emit,
    cancel: anyio.Event | None = None,
    limits: TurnLimits | None = None,
) -> BridgeResult:
    """One yaocode turn in an acquired sandbox; never raises for model or tool failures.

    Raises:
        ConfigError: the assistant has no usable connector.
        RunnerError: bad `runner.options`.
    """
    assistant = inp.assistant
    spec = assistant.sandbox
    assert spec is not None, "run_yaocode_turn needs a sandbox assistant"
    connector = runner_connector(assistant, loader)
    if connector is None:
        raise ConfigError("the yaocode runner needs a connector", file=assistant.path / "package.yao")
    options = NativeOptions.parse(RUNNER, spec.runner.options)
    limits = limits or TurnLimits()
    base = native_dir(manager.settings.data_dir)
    checkpoints = JsonFileCheckpoints(base / "checkpoints")
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
    messages = [*await _history(resume, checkpoints, assistant.id, inp.chat_id), prompt]
    mount = lease.mount_path.rstrip("/")
    root = await deliver_skills(
        LeasedSandbox(manager, lease),
        RUNNER,
        assistant.skills,
        home=f"{mount}/{HOME_SUBDIR}",
        state_dir=f"{mount}/{STATE_SUBDIR}",
        workspace_root=mount,
    )
    skills = cards(assistant.skills, root=root)
    package = assistant.package.options
    refuse_options(assistant.path / "package.yao", assistant.package, RUNNER, connector.type.value)
    model = model_options(connector, package)
    client = client_for(package_model(connector, package))
    summary_client = client_for(light) if light is not None else None
    tools = coding_tools(LeaseToolSandbox(manager, lease), bash_timeout=options.bash_timeout)
    if options.agent:
        agent = AgentTool(
            client,
            tools,
            runner=RUNNER,
            tool_timeout=options.tool_timeout,
            sessions=inp.child_sessions,
            system=options.agent_system or SUBAGENT_SYSTEM,
        )
        tools.add(agent)
    if skills:
        tools.add(SkillTool(skills))
    if inp.gate is not None:
        tools.add(QuestionTool())
    servers = AsyncExitStack()  # the MCP servers (stdio ones in the sandbox) live as long as the turn
    try:
        toolset = await servers.enter_async_context(
            McpToolset.open(assistant.mcp_servers, stdio=sandbox_stdio(manager, lease))
        )
    except ToolError as exc:
        with anyio.CancelScope(shield=True):
            await client.aclose()
            if summary_client is not None:
                await summary_client.aclose()
        return await _mcp_failed(builder, emit, exc)
    for tool in toolset.tools:
        tools.add(tool)
    loop = AgentLoop(
        client,
        tools,
        system=with_skills(system_prompt(assistant), skills),
        options=model,
        max_rounds=options.rounds(_max_turn(assistant)),
        parallel_tools=options.parallel_tools,
        max_parallel=options.max_parallel,
        tool_timeout=options.tool_timeout,
        checkpoints=checkpoints,
        compaction=compaction_policy(connector, model, assistant.package.compaction),
        runner=RUNNER,
        gate=inp.gate,
        summary_client=summary_client,
    )
    watch = _Watch(emit, builder, limits, inp.gate)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch.run, cancel or anyio.Event())
            result = await loop.run(
                messages, builder, watch.stop, emit=watch.emit, session_id=inp.chat_id, turn_id=inp.turn_id
            )
            tg.cancel_scope.cancel()
    finally:
        await servers.aclose()  # not under a new shield: the toolset's own scopes must unwind in order
        with anyio.CancelScope(shield=True):
            await client.aclose()
            if summary_client is not None:
                await summary_client.aclose()
    await _save_trace(base / "traces", inp.turn_id, result)
    await emit(summary_events(builder, result))
    outcome = _outcome(result, watch.reason, limits)
    if outcome.error is not None and watch.reason in (StopReason.TIMEOUT, StopReason.STALLED):
        await emit(builder.error(outcome.error, f"turn_{watch.reason.value}"))
    resume_state: dict[str, str] = {}
    if outcome.status == "completed":
        resume_state = {RESUME_KEY: inp.turn_id}
        await resume.put(assistant.id, inp.chat_id, RUNNER, resume_state)
    log.info("yaocode.turn_done", turn_id=inp.turn_id, stop=result.stop_reason, rounds=result.rounds)
    return BridgeResult(outcome, exit_code=None, stopped=watch.reason, resume_state=resume_state)
