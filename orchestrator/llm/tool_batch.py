"""`ToolBatch`: runs the tool calls of one model step — in parallel under a limiter, or one by
one — each under its own timeout, and reports them as `execute` events."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import anyio
from pydantic import JsonValue

from orchestrator.errors import CageError
from orchestrator.llm.event_sink import EventSink
from orchestrator.llm.loop_state import ToolTrace
from orchestrator.llm.messages import ToolCallBlock, ToolResultBlock
from orchestrator.llm.tool_requests import UNGATED, native_request
from orchestrator.llm.tools.base import ToolBox, ToolContext, ToolResult
from orchestrator.permissions import PermissionGate
from orchestrator.stream import ExecuteType, TurnBuilder

_SUMMARY_KEYS = ("command", "path", "pattern", "prompt", "url", "query")
_SEMANTIC: dict[str, ExecuteType] = {"agent": "agent", "todo": "todo", "question": "question"}


def summary(call: ToolCallBlock) -> str | None:
    """One line for humans: the command, path or pattern of the call."""
    for key in _SUMMARY_KEYS:
        value = call.arguments.get(key)
        if isinstance(value, str) and value:
            return value if len(value) <= 120 else value[:117] + "..."
    prompts = call.arguments.get("prompts")
    if isinstance(prompts, list):
        return f"{len(prompts)} tasks"
    return None


@dataclass(frozen=True)
class BatchSettings:
    parallel: bool = True
    max_parallel: int = 4
    timeout: float = 300.0
    runner: str = "yaocode"


class ToolBatch:
    """Runs one step's calls against a `ToolBox`, emitting `tool_started`/`tool_finished`."""

    def __init__(
        self,
        tools: ToolBox,
        sink: EventSink,
        builder: TurnBuilder,
        settings: BatchSettings,
        *,
        session_id: str,
        turn_id: str,
        cancel: anyio.Event | None,
        gate: PermissionGate | None = None,
    ) -> None:
        self._tools = tools
        self._gate = gate
        self._sink = sink
        self._builder = builder
        self._settings = settings
        self._session_id = session_id
        self._turn_id = turn_id
        self._cancel = cancel
        size = max(1, settings.max_parallel) if settings.parallel else 1
        self._limiter = anyio.CapacityLimiter(size)

    async def run(
        self, calls: Sequence[ToolCallBlock], bad_arguments: Mapping[str, str] | None = None
    ) -> tuple[list[ToolResultBlock], list[ToolTrace]]:
        """Results in the order of `calls`, and the trace of each run."""
        problems = bad_arguments or {}
        results: list[ToolResultBlock | None] = [None] * len(calls)
        traces: list[ToolTrace | None] = [None] * len(calls)

        async def one(index: int, call: ToolCallBlock) -> None:
            async with self._limiter:
                results[index], traces[index] = await self._run_one(call, problems.get(call.id))

        async with anyio.create_task_group() as tg:
            for index, call in enumerate(calls):
                tg.start_soon(one, index, call)
        return [r for r in results if r is not None], [t for t in traces if t is not None]

    async def _run_one(self, call: ToolCallBlock, problem: str | None) -> tuple[ToolResultBlock, ToolTrace]:
        started = time.monotonic()
        await self._sink(
            lambda: self._builder.tool_started(
                call.id,
                call.name,
                dict(call.arguments),
                runner=self._settings.runner,
                semantic_type=_SEMANTIC.get(call.name, "execute"),
                summary=summary(call),
            )
        )
        result = await self._invoke(call, problem)
        exit_code = result.metadata.get("exit_code")
        await self._sink(
            lambda: self._builder.tool_finished(
                call.id,
                result.output,
                is_error=result.is_error,
                exit_code=exit_code if isinstance(exit_code, int) else None,
            )
        )
        block = ToolResultBlock(call_id=call.id, output=result.output, is_error=result.is_error)
        trace = ToolTrace(
            call_id=call.id,
            name=call.name,
            arguments=dict(call.arguments),
            is_error=result.is_error,
            started=started,
            ended=time.monotonic(),
            metadata=result.metadata,
        )
        return block, trace

    async def _invoke(self, call: ToolCallBlock, problem: str | None) -> ToolResult:
        if problem is not None:
            return ToolResult.error(f"{call.name}: {problem}")
        tool = self._tools.get(call.name)
        if tool is None:
            return ToolResult.error(f"unknown tool {call.name!r}; available: {', '.join(self._tools.names)}")
        ctx = ToolContext(
            session_id=self._session_id,
            turn_id=self._turn_id,
            tool_call_id=call.id,
            sink=self._sink,
            builder=self._builder,
            cancel=self._cancel,
            gate=self._gate,
        )
        if self._gate is not None and call.name not in UNGATED:  # the permission hook
            decision = await self._gate.check(native_request(call, self._settings.runner))
            if not decision.allow:
                return ToolResult.error(decision.message or f"{call.name}: refused", refused=True)
        arguments: Mapping[str, JsonValue] = call.arguments
        timeout = self._settings.timeout
        with anyio.move_on_after(timeout) as scope:
            try:
                return await tool.run(arguments, ctx)
            except (CageError, OSError) as exc:
                return ToolResult.error(f"{call.name} failed: {exc}")
        assert scope.cancelled_caught
        return ToolResult.error(f"{call.name} timed out after {timeout:g}s", timed_out=True)
