"""The `agent` tool: up to 8 read-only sub-agents at once, each its own loop run and child session.

Tasks are `prompt` (one) or `prompts` (several), exactly one of the two; each task is a string or
`{name, prompt}` (unnamed ones are `task-<n>`), and results come back under their names.

With `ChildSessions` (the pipeline's, backed by the store), each sub-agent gets a persisted child
session of its own, linked to the parent: its events go into that session's log, and the parent's
timeline gets only a `subagent/started` / `subagent/ended` pair naming the child session. Without
one (a run with no store), a task gets the id `<session>/agent-<n>` and, when the parent streams
events, a nested thread in the parent's stream (`stream_start`/`stream_end` with that id).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import partial
from typing import Protocol

import anyio
from pydantic import Field, JsonValue, model_validator

from orchestrator.llm.client import ModelClient
from orchestrator.llm.engine import AgentLoop
from orchestrator.llm.event_sink import EventSink, collecting
from orchestrator.llm.loop_state import LoopResult
from orchestrator.llm.messages import ChatMessage, ModelOptions
from orchestrator.llm.tools.base import ArgsModel, ToolBox, ToolContext, ToolResult, TypedTool
from orchestrator.stream import CountingIds, Event, RandomIds, StreamStatus, TurnBuilder

MAX_CONCURRENCY = 8
MAX_TASK_TEXT = 2000
"""Characters of a task's prompt kept in its child session's `stream_start` metadata."""
SUBAGENT_SYSTEM = (
    "You are a read-only research sub-agent. Investigate the task with the tools you have (they "
    "cannot change anything) and answer with a concise, factual report."
)


class AgentTask(ArgsModel):
    """A named task: `name` labels its result and its child session."""

    name: str = Field(default="", max_length=80)
    prompt: str = Field(min_length=1)


class AgentArgs(ArgsModel):
    prompt: str | AgentTask | None = None
    """One task for one sub-agent: a string or `{name, prompt}`."""
    prompts: list[str | AgentTask] | None = Field(default=None, max_length=32)
    """Several independent tasks, run concurrently (strings or `{name, prompt}`)."""
    max_concurrency: int = Field(default=MAX_CONCURRENCY, ge=1)
    """Sub-agents running at once (capped at 8)."""

    @model_validator(mode="after")
    def _one_of(self) -> AgentArgs:
        if (self.prompt is None) == (self.prompts is None):
            raise ValueError("give exactly one of `prompt` (one task) and `prompts` (several)")
        if not self.tasks:
            raise ValueError("give `prompt` or a non-empty `prompts`")
        return self

    @property
    def tasks(self) -> list[AgentTask]:
        """The tasks, named (`task-<n>` when unnamed), without empty prompts."""
        given = [self.prompt] if self.prompt is not None else list(self.prompts or [])
        out: list[AgentTask] = []
        for n, task in enumerate(given, start=1):
            item = AgentTask(prompt=task) if isinstance(task, str) else task
            if item.prompt.strip():
                out.append(item if item.name.strip() else item.model_copy(update={"name": f"task-{n}"}))
        return out


class ChildSession(Protocol):
    """A sub-agent's persisted session: its id, its own event log."""

    @property
    def id(self) -> str: ...

    async def emit(self, events: Sequence[Event]) -> None:
        """Append events to the child's own log."""
        ...


class ChildSessions(Protocol):
    """Creates sub-agents' child sessions under the parent's."""

    async def open(self, name: str, task: str) -> ChildSession:
        """A new child session for the task (a failure fails the task)."""
        ...


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
        sessions: ChildSessions | None = None,
    ) -> None:
        """`tools` may be the parent's box: only its read-only tools (never `agent`) are given.
        `system` is the sub-agents' system prompt (`runner.options.agent_system` overrides it)."""
        self._sessions = sessions
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

        async def one(index: int) -> None:
            async with limiter:
                self.in_flight += 1
                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                try:
                    results[index] = await self._run_task(tasks[index], ctx)
                finally:
                    self.in_flight -= 1

        async with anyio.create_task_group() as tg:
            for index in range(len(tasks)):
                tg.start_soon(one, index)
        done = [r for r in results if r is not None]
        sections = [
            f"## {task.name}: {task.prompt[:80]}\n{result.text or '(no answer)'}"
            + ("" if result.stop_reason == "completed" else f"\n[sub-agent stopped: {result.stop_reason}]")
            for task, (_, result) in zip(tasks, done, strict=True)
        ]
        children: list[JsonValue] = [
            {
                "task": n,
                "name": task.name,
                "session_id": sid,
                "stop_reason": r.stop_reason,
                "rounds": r.rounds,
            }
            for n, (task, (sid, r)) in enumerate(zip(tasks, done, strict=True), start=1)
        ]
        failed = all(r.stop_reason in ("error", "cancelled") for _, r in done)
        return ToolResult(output="\n\n".join(sections), is_error=failed, metadata={"children": children})

    async def _run_task(self, task: AgentTask, ctx: ToolContext) -> tuple[str, LoopResult]:
        """The task's child session id and how its loop ended."""
        if self._sessions is not None:
            return await self._run_in_child_session(self._sessions, task, ctx)
        child_id = f"{ctx.session_id}/agent-{next(self._counter)}"
        loop = self._loop(ctx)
        if ctx.sink is None or ctx.builder is None:  # no parent stream: keep the child's events local
            _, emit = collecting()
            builder = TurnBuilder(CountingIds(), runner=self._runner)
            return child_id, await loop.run(
                [ChatMessage.user(task.prompt)],
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
                [ChatMessage.user(task.prompt)],
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
        return child_id, result

    async def _run_in_child_session(
        self, sessions: ChildSessions, task: AgentTask, ctx: ToolContext
    ) -> tuple[str, LoopResult]:
        """The task in a persisted child session: its events in the child's log, a started/ended
        pair in the parent's stream."""
        session = await sessions.open(task.name, task.prompt)
        child_sink = EventSink(session.emit)
        builder = TurnBuilder(RandomIds(), runner=self._runner)
        metadata: dict[str, JsonValue] = {
            "parent_session_id": ctx.session_id,
            "parent_tool_id": ctx.tool_call_id,
            "task": task.prompt[:MAX_TASK_TEXT],
        }
        await child_sink(partial(builder.stream_start, self.name, session_id=session.id, metadata=metadata))
        if ctx.sink is not None and ctx.builder is not None:
            parent = ctx.builder
            await ctx.sink(partial(parent.subagent_started, session.id, task.name, tool_id=ctx.tool_call_id))
        result: LoopResult | None = None
        try:
            result = await self._loop(ctx).run(
                [ChatMessage.user(task.prompt)],
                builder,
                ctx.cancel,
                emit=child_sink,
                session_id=session.id,
                turn_id=ctx.turn_id,
            )
        finally:
            status: StreamStatus = _status(result) if result is not None else "cancelled"
            error = result.error if result is not None else None
            with anyio.CancelScope(shield=True):
                await child_sink(partial(builder.stream_end, status, error=error))
                if ctx.sink is not None and ctx.builder is not None:
                    parent = ctx.builder
                    await ctx.sink(partial(parent.subagent_ended, session.id, task.name, status, error=error))
        return session.id, result
