"""`YaocodeAdapter`: the `yaocode` runner — Cage's native loop in the orchestrator, every tool
call in the sandbox.

The model is called from here (the connector's own URL, no container rewrite); bash, read,
write, edit, glob, grep, ls and the `agent` tool's sub-agents run inside the assistant's
container through the turn's `LoopTurn.tools`, stdio MCP servers through `LoopTurn.stdio`.

Checkpoints go to `<state_dir>/checkpoints/<turn_id>.json` after every step, and the run's
trace (rounds, tool calls with their timing and metadata, sub-agent sessions) to
`<state_dir>/traces/<turn_id>.json`. A completed turn is the starting point of the next turn in
the same session (`RESUME_KEY` in the resume state).
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import structlog

from orchestrator.dsl import Assistant
from orchestrator.dsl.option_support import refuse_options
from orchestrator.errors import ToolError
from orchestrator.llm import (
    AgentLoop,
    ChatMessage,
    JsonFileCheckpoints,
    LoopResult,
    client_for,
    compaction_policy,
    model_options,
    package_model,
)
from orchestrator.llm.mcp import McpToolset
from orchestrator.llm.tools.skills import cards, with_skills
from orchestrator.stream import Emit, TurnBuilder
from runners.base import Supports, TurnOutcome
from runners.loop_adapter import LoopRun, LoopTurn, LoopWatch
from runners.native_loop.options import NativeOptions
from runners.native_loop.outcome import loop_status, summary_events
from runners.native_loop.tools import native_tools

log = structlog.get_logger(__name__)

RUNNER = "yaocode"
RESUME_KEY = "turn_id"


async def _history(checkpoints: JsonFileCheckpoints, turn: LoopTurn) -> list[ChatMessage]:
    """The messages of the session's last completed yaocode turn, if its checkpoint is still there."""
    previous = turn.resume.get(RESUME_KEY)
    if not previous:
        return []
    checkpoint = await checkpoints.load(previous)
    if checkpoint is None:
        log.warning("yaocode.history_missing", session_id=turn.session_id, turn_id=previous)
        return []
    return list(checkpoint.messages)


async def _save_trace(directory: Path, turn_id: str, result: LoopResult) -> None:
    path = anyio.Path(directory / f"{turn_id}.json")
    await anyio.Path(directory).mkdir(parents=True, exist_ok=True)
    trace = result.model_dump_json(include={"stop_reason", "rounds", "steps", "usage", "error"})
    await path.write_text(trace, encoding="utf-8")


def _max_turn(assistant: Assistant) -> int | None:
    """`mcp.options.max_turn` when the package sets it."""
    options = assistant.mcp_options
    return options.max_turn if "max_turn" in options.model_fields_set else None


async def _mcp_failed(builder: TurnBuilder, emit: Emit, exc: ToolError) -> LoopRun:
    """A server could not be started or connected: the turn would offer the model part of its
    tools, so it ends in error naming the server."""
    message = str(exc)
    log.warning("yaocode.mcp_unavailable", error=message)
    await emit(builder.error(message, "mcp_unavailable"))
    return LoopRun(TurnOutcome(status="error", error=message, stop_reason="error"))


class YaocodeAdapter:
    """Runs one yaocode turn (see the module docstring)."""

    name = RUNNER
    image = "tools"
    supports = Supports(
        resume=True, thinking=True, text_deltas=True, usage=True, cost=False, mcp=True, images=True
    )

    async def run(self, turn: LoopTurn, builder: TurnBuilder, emit: Emit, watch: LoopWatch) -> LoopRun:
        """One turn; never raises for model, tool or MCP failures.

        Raises:
            ConfigError: bad `runner.options`, or package options the runner refuses.
        """
        assistant = turn.assistant
        spec = assistant.sandbox
        assert spec is not None, "yaocode needs a sandbox assistant"
        options = NativeOptions.parse(spec.runner.options)
        checkpoints = JsonFileCheckpoints(turn.state_dir / "checkpoints")
        messages = [*await _history(checkpoints, turn), turn.prompt]
        skills = cards(assistant.skills, root=turn.skills_root)
        package = assistant.package.options
        connector = turn.connector
        refuse_options(assistant.file("package.yao"), assistant.package, RUNNER, connector.type.value)
        model = model_options(connector, package)
        client = client_for(package_model(connector, package))
        summary_client = client_for(turn.light) if turn.light is not None else None
        servers = AsyncExitStack()  # the MCP servers (stdio ones in the sandbox) live as long as the turn
        try:
            toolset = await servers.enter_async_context(
                McpToolset.open(assistant.mcp_servers, stdio=turn.stdio)
            )
        except ToolError as exc:
            with anyio.CancelScope(shield=True):
                await client.aclose()
                if summary_client is not None:
                    await summary_client.aclose()
            return await _mcp_failed(builder, emit, exc)
        tools = native_tools(
            client,
            turn.tools,
            options,
            runner=RUNNER,
            skills=skills,
            mcp_tools=toolset.tools,
            asks=turn.gate is not None,
            sessions=turn.child_sessions,
        )
        loop = AgentLoop(
            client,
            tools,
            system=with_skills(turn.system, skills),
            options=model,
            max_rounds=options.rounds(_max_turn(assistant)),
            parallel_tools=options.parallel_tools,
            max_parallel=options.max_parallel,
            tool_timeout=options.tool_timeout,
            checkpoints=checkpoints,
            compaction=compaction_policy(connector, model, assistant.package.compaction),
            runner=RUNNER,
            gate=turn.gate,
            summary_client=summary_client,
        )
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch.run)
                result = await loop.run(
                    messages,
                    builder,
                    watch.stop,
                    emit=watch.emit,
                    session_id=turn.session_id,
                    turn_id=turn.turn_id,
                )
                tg.cancel_scope.cancel()
        finally:
            await servers.aclose()  # not under a new shield: the toolset's own scopes must unwind in order
            with anyio.CancelScope(shield=True):
                await client.aclose()
                if summary_client is not None:
                    await summary_client.aclose()
        await _save_trace(turn.state_dir / "traces", turn.turn_id, result)
        await emit(summary_events(builder, result))
        status, error = loop_status(result)
        outcome = TurnOutcome(status=status, error=error, stop_reason=result.stop_reason, usage=result.usage)
        log.info("yaocode.turn_done", turn_id=turn.turn_id, stop=result.stop_reason, rounds=result.rounds)
        return LoopRun(outcome, resume_state={RESUME_KEY: turn.turn_id})
