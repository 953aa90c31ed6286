"""The `agent` tool: up to 8 read-only sub-agents at once, each its own loop run and child session.

Each task gets a child session id under the parent (`<session>/agent-<n>` with `n` counted per
tool instance, so ids stay distinct across calls) and, when the parent streams events, a nested
thread (`stream_start`/`stream_end` with that id as `thread_id`). Results come back named per task.
"""

from __future__ import annotations

import itertools
from functools import partial

import anyio
from pydantic import Field, JsonValue, model_validator

from orchestrator.llm.client import ModelClient
from orchestrator.llm.engine import AgentLoop
from orchestrator.llm.event_sink import EventSink, collecting
from orchestrator.llm.loop_state import LoopResult
from orchestrator.llm.messages import ChatMessage, ModelOptions
from orchestrator.llm.tools.base import ArgsModel, ToolBox, ToolContext, ToolResult, TypedTool
from orchestrator.stream import CountingIds, StreamStatus, TurnBuilder

MAX_CONCURRENCY = 8
SUBAGENT_SYSTEM = (
    "You are a read-only research sub-agent. Investigate the task with the tools you have (they "
    "cannot change anything) and answer with a concise, factual report."
)


class AgentArgs(ArgsModel):
    prompt: str | None = None
    """One task for one sub-agent."""
    prompts: list[str] | None = Field(default=None, max_length=32)
    """Several independent tasks, run concurrently."""
    max_concurrency: int = Field(default=MAX_CONCURRENCY, ge=1)
    """Sub-agents running at once (capped at 8)."""

    @model_validator(mode="after")
    def _one_of(self) -> AgentArgs:
        if not self.tasks:
            raise ValueError("give `prompt` or a non-empty `prompts`")
        return self

    @property
    def tasks(self) -> list[str]:
        return [p for p in ([self.prompt] if self.prompt else []) + (self.prompts or []) if p.strip()]


def _status(result: LoopResult) -> StreamStatus:
    return {"completed": "completed", "cancelled": "cancelled"}.get(result.stop_reason, "error")  # type: ignore[return-value]


class AgentTool(TypedTool[AgentArgs]):
    name = "agent"
    description = (
        "Delegate research to read-only sub-agents: `prompt` for one task or `prompts` for several "
        "independent ones (run concurrently, at most 8 at once). Each returns a report."
    )
    read_only = True
    args_model = AgentArgs

    def __init__(
        self,
        client: ModelClient,
        tools: ToolBox,
        *,
        system: str = SUBAGENT_SYSTEM,
        options: ModelOptions | None = None,
        max_rounds: int = 8,
        tool_timeout: float = 120.0,
        runner: str = "yaocode",
    ) -> None:
        """`tools` may be the parent's box: only its read-only tools (never `agent`) are given."""
        self._client = client
        self._tools = tools.read_only().without(self.name)
        self._system = system
        self._options = options
        self._max_rounds = max_rounds
        self._tool_timeout = tool_timeout
        self._runner = runner
        self._counter = itertools.count(1)
        self.in_flight = 0
        self.peak_in_flight = 0
        """Most sub-agents seen running at once (for traces and tests)."""

    def _loop(self, ctx: ToolContext) -> AgentLoop:
        """The sub-agent's loop; it asks the parent's gate (the parent turn's client)."""
        return AgentLoop(
            self._client,
            self._tools,
            system=self._system,
            options=self._options,
            max_rounds=self._max_rounds,
            tool_timeout=self._tool_timeout,
            runner=self._runner,
            gate=ctx.gate,
        )

    async def call(self, args: AgentArgs, ctx: ToolContext) -> ToolResult:
        tasks = args.tasks
        limiter = anyio.CapacityLimiter(min(args.max_concurrency, MAX_CONCURRENCY))
        results: list[tuple[str, LoopResult] | None] = [None] * len(tasks)
        child_ids = [f"{ctx.session_id}/agent-{next(self._counter)}" for _ in tasks]

        async def one(index: int) -> None:
            async with limiter:
                self.in_flight += 1
                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                try:
                    results[index] = (
                        child_ids[index],
                        await self._run_task(tasks[index], child_ids[index], ctx),
                    )
                finally:
                    self.in_flight -= 1

        async with anyio.create_task_group() as tg:
            for index in range(len(tasks)):
                tg.start_soon(one, index)
        done = [r for r in results if r is not None]
        sections = [
            f"## Task {n}: {task[:80]}\n{result.text or '(no answer)'}"
            + ("" if result.stop_reason == "completed" else f"\n[sub-agent stopped: {result.stop_reason}]")
            for n, (task, (_, result)) in enumerate(zip(tasks, done, strict=True), start=1)
        ]
        children: list[JsonValue] = [
            {"task": n, "session_id": sid, "stop_reason": r.stop_reason, "rounds": r.rounds}
            for n, (sid, r) in enumerate(done, start=1)
        ]
        failed = all(r.stop_reason in ("error", "cancelled") for _, r in done)
        return ToolResult(output="\n\n".join(sections), is_error=failed, metadata={"children": children})

    async def _run_task(self, task: str, child_id: str, ctx: ToolContext) -> LoopResult:
        loop = self._loop(ctx)
        if ctx.sink is None or ctx.builder is None:  # no parent stream: keep the child's events local
            _, emit = collecting()
            builder = TurnBuilder(CountingIds(), runner=self._runner)
            return await loop.run(
                [ChatMessage.user(task)],
                builder,
                ctx.cancel,
                emit=emit,
                session_id=child_id,
                turn_id=ctx.turn_id,
            )
        sink: EventSink = ctx.sink
        child = ctx.builder.child(child_id)
        await sink(partial(child.stream_start, self.name, metadata={"parent_tool_id": ctx.tool_call_id}))
        result: LoopResult | None = None
        try:
            result = await loop.run(
                [ChatMessage.user(task)],
                child,
                ctx.cancel,
                emit=sink,
                session_id=child_id,
                turn_id=ctx.turn_id,
            )
        finally:
            # The thread must be closed even when the parent is cancelled around us.
            status: StreamStatus = _status(result) if result is not None else "cancelled"
            with anyio.CancelScope(shield=True):
                await sink(partial(child.stream_end, status, error=result.error if result else None))
        return result
