"""`AgentLoop`: the native agent loop shared by the yaocode runner, the tai CLI and LLM mode.

One run: stream a model step (text and thinking straight into the builder), run the step's tool
calls (parallel under a limiter by default, each under its own timeout), feed the results back,
and repeat until the model answers without tools or a limit stops it. Stop reasons:
`completed`, `max_rounds`, `tool_loop_terminated` (a call repeated with identical arguments in
consecutive rounds), `cancelled` and `error`. A checkpoint is saved after every model step and
after its tools, so a crashed turn can be inspected and `resume`d.

`stream_start`/`stream_end` belong to the caller, like for the runner bridge.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from functools import partial

import anyio
import structlog

from orchestrator.errors import ModelError
from orchestrator.llm.assembly import StepAssembler
from orchestrator.llm.checkpoint import Checkpoint, CheckpointSink, Phase
from orchestrator.llm.client import ModelClient
from orchestrator.llm.compaction import CompactionPolicy, Compactor
from orchestrator.llm.deltas import TextDelta, ThinkingDelta, ToolCallArgs, ToolCallStart
from orchestrator.llm.event_sink import EventSink
from orchestrator.llm.loop_state import LoopResult, LoopState, LoopStop, StepTrace, call_signature
from orchestrator.llm.messages import ChatMessage, ModelOptions, ToolCallBlock, ToolResultBlock
from orchestrator.llm.tool_batch import BatchSettings, ToolBatch
from orchestrator.llm.tools.base import ToolBox
from orchestrator.permissions import PermissionGate
from orchestrator.stream import Emit, TurnBuilder

log = structlog.get_logger(__name__)

NOT_RUN_REPEAT = "not run: this exact call was already made in the previous round"
NOT_RUN_CANCELLED = "not run: the turn was cancelled"


class AgentLoop:
    """The loop engine. Stateless between runs: one instance may serve many turns."""

    def __init__(
        self,
        client: ModelClient,
        tools: ToolBox,
        *,
        system: str = "",
        options: ModelOptions | None = None,
        max_rounds: int = 8,
        parallel_tools: bool = True,
        max_parallel: int = 4,
        tool_timeout: float = 300.0,
        checkpoints: CheckpointSink | None = None,
        compaction: CompactionPolicy | None = None,
        runner: str = "yaocode",
        emit_tool_calls: bool = False,
        gate: PermissionGate | None = None,
        summary_client: ModelClient | None = None,
    ) -> None:
        """`emit_tool_calls` adds LLM-mode `tool_call` events for the model's calls as they stream.
        `gate` is asked before each tool call (a refused call's result is the refusal).
        `summary_client` writes the compaction summaries (a `light` role model), else `client`."""
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        self.client = client
        self.tools = tools
        self.system = system
        self.options = options or ModelOptions()
        self.max_rounds = max_rounds
        self.batch = BatchSettings(
            parallel=parallel_tools, max_parallel=max_parallel, timeout=tool_timeout, runner=runner
        )
        self.checkpoints = checkpoints
        self.compactor = Compactor(summary_client or client, compaction) if compaction is not None else None
        self.emit_tool_calls = emit_tool_calls
        self.gate = gate

    async def run(
        self,
        messages: Sequence[ChatMessage],
        builder: TurnBuilder,
        cancel: anyio.Event | None = None,
        *,
        emit: Emit | EventSink,
        session_id: str = "",
        turn_id: str = "",
    ) -> LoopResult:
        """Run one turn from `messages` (the history ending with the user's prompt)."""
        state = LoopState(
            session_id=session_id or f"session-{secrets.token_hex(4)}",
            turn_id=turn_id or f"turn-{secrets.token_hex(4)}",
            messages=list(messages),
        )
        return await self._drive(state, builder, cancel, emit)

    async def resume(
        self,
        checkpoint: Checkpoint,
        builder: TurnBuilder,
        cancel: anyio.Event | None = None,
        *,
        emit: Emit | EventSink,
    ) -> LoopResult:
        """Continue a run from a checkpoint: pending tool calls first, then the loop."""
        state = LoopState(
            session_id=checkpoint.session_id,
            turn_id=checkpoint.turn_id,
            messages=list(checkpoint.messages),
            rounds=checkpoint.round,
            usage=checkpoint.usage.model_copy(update={"scope": "turn"}),
        )
        return await self._drive(state, builder, cancel, emit)

    # -- the run -----------------------------------------------------------------------------

    async def _drive(
        self, state: LoopState, builder: TurnBuilder, cancel: anyio.Event | None, emit: Emit | EventSink
    ) -> LoopResult:
        sink = emit if isinstance(emit, EventSink) else EventSink(emit)
        stop: LoopStop = "error"
        error: str | None = None
        work = anyio.CancelScope()
        async with anyio.create_task_group() as watchers:
            if cancel is not None:
                watchers.start_soon(_cancel_on, cancel, work)
            with work:
                try:
                    stop = await self._loop(state, builder, sink, cancel)
                except ModelError as exc:
                    stop, error = "error", str(exc)
                    await sink(partial(builder.error, str(exc), "model_error", {"status": exc.status}))
            watchers.cancel_scope.cancel()
        if work.cancelled_caught:
            stop = "cancelled"
            await self._settle_cancelled(state, builder, sink)
        await sink(builder.close_open_messages)
        await self._save(state, "done", stop)
        log.info("loop.done", turn_id=state.turn_id, stop=stop, rounds=state.rounds)
        return state.result(stop, error)

    async def _loop(
        self, state: LoopState, builder: TurnBuilder, sink: EventSink, cancel: anyio.Event | None
    ) -> LoopStop:
        batch = ToolBatch(
            self.tools,
            sink,
            builder,
            self.batch,
            session_id=state.session_id,
            turn_id=state.turn_id,
            cancel=cancel,
            gate=self.gate,
        )
        pending = _pending_calls(state.messages)
        if pending:  # resumed after the model step: its tools never ran
            results, _ = await batch.run(pending)
            state.messages.append(ChatMessage(role="user", content=tuple(results)))
            state.previous_calls = _succeeded(pending, results)
            await self._save(state, "tools")
        while True:
            if state.rounds >= self.max_rounds:
                await sink(lambda: builder.error(f"stopped after {state.rounds} rounds", "max_rounds"))
                return "max_rounds"
            compacted = await self._maybe_compact(state, builder, sink)
            assembler, started = await self._model_step(state, builder, sink)
            message = assembler.message()
            state.rounds += 1
            state.add_usage(assembler.usage)
            state.messages.append(message)
            await self._save(state, "model")
            calls = message.tool_calls
            step = StepTrace(
                round=state.rounds,
                text=message.text,
                model_stop=assembler.stop,
                usage=assembler.usage,
                compacted=compacted,
            )
            if not calls:
                state.steps.append(step)
                return "completed"
            signatures = {call_signature(c) for c in calls}
            if signatures & state.previous_calls:
                refused = tuple(
                    ToolResultBlock(call_id=c.id, output=NOT_RUN_REPEAT, is_error=True) for c in calls
                )
                state.messages.append(ChatMessage(role="user", content=refused))
                state.steps.append(step)
                names = sorted({name for name, _ in signatures & state.previous_calls})
                why = f"the same tool call repeated in consecutive rounds: {', '.join(names)}"
                await sink(partial(builder.error, why, "tool_loop_terminated"))
                return "tool_loop_terminated"
            results_list, traces = await batch.run(calls, assembler.bad_arguments)
            # A failed call may be retried as is (the model saw the error); only a repeated
            # *successful* call is a loop.
            state.previous_calls = _succeeded(calls, results_list)
            state.messages.append(ChatMessage(role="user", content=tuple(results_list)))
            state.steps.append(step.model_copy(update={"tools": tuple(traces)}))
            await self._save(state, "tools")
            log.debug(
                "loop.step", turn_id=state.turn_id, round=state.rounds, seconds=time.monotonic() - started
            )

    async def _model_step(
        self, state: LoopState, builder: TurnBuilder, sink: EventSink
    ) -> tuple[StepAssembler, float]:
        started = time.monotonic()
        assembler = StepAssembler()
        request = self.options.request(self.system, tuple(state.messages), self.tools.specs())
        async for delta in self.client.stream(request):
            assembler.feed(delta)
            if isinstance(delta, TextDelta):
                await sink(partial(builder.text, delta.text))
            elif isinstance(delta, ThinkingDelta) and delta.text:
                await sink(partial(builder.thinking, delta.text))
            elif self.emit_tool_calls and isinstance(delta, ToolCallStart):
                await sink(partial(builder.tool_call, delta.index, "", id=delta.id, name=delta.name))
            elif self.emit_tool_calls and isinstance(delta, ToolCallArgs):
                await sink(partial(builder.tool_call, delta.index, delta.fragment))
        usage = assembler.usage
        await sink(lambda: builder.usage(usage))
        return assembler, started

    async def _maybe_compact(self, state: LoopState, builder: TurnBuilder, sink: EventSink) -> bool:
        compactor = self.compactor
        if compactor is None or not compactor.needed(self.system, state.messages, self.tools.specs()):
            return False
        await sink(lambda: builder.loading("Compacting the conversation"))
        result = await compactor.compact(state.messages)
        await sink(builder.loading_done)
        if result is None:
            return False
        state.messages = list(result.messages)
        state.add_usage(result.usage)
        usage = result.usage
        await sink(lambda: builder.usage(usage))
        log.info("loop.compacted", turn_id=state.turn_id, removed=result.removed)
        return True

    async def _settle_cancelled(self, state: LoopState, builder: TurnBuilder, sink: EventSink) -> None:
        """Give every unanswered call a result and fail the tools still shown as running."""
        for tool_id in builder.running_tools:
            await sink(partial(builder.tool_finished, tool_id, "cancelled", is_error=True))
        pending = _pending_calls(state.messages)
        if pending:
            results = tuple(
                ToolResultBlock(call_id=c.id, output=NOT_RUN_CANCELLED, is_error=True) for c in pending
            )
            state.messages.append(ChatMessage(role="user", content=results))

    async def _save(self, state: LoopState, phase: Phase, stop: str | None = None) -> None:
        if self.checkpoints is None:
            return
        checkpoint = Checkpoint(
            session_id=state.session_id,
            turn_id=state.turn_id,
            round=state.rounds,
            phase=phase,
            messages=tuple(state.messages),
            usage=state.usage,
            stop_reason=stop,
        )
        with anyio.CancelScope(shield=True):
            await self.checkpoints.save(checkpoint)


def _pending_calls(messages: Sequence[ChatMessage]) -> list[ToolCallBlock]:
    """The last assistant message's calls when no results follow it."""
    if not messages or messages[-1].role != "assistant":
        return []
    return list(messages[-1].tool_calls)


async def _cancel_on(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def _succeeded(calls: Sequence[ToolCallBlock], results: Sequence[ToolResultBlock]) -> set[tuple[str, str]]:
    """Signatures of the calls whose result was not an error."""
    failed = {r.call_id for r in results if r.is_error}
    return {call_signature(c) for c in calls if c.id not in failed}
