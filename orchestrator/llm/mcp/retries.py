"""Tool failures in LLM mode: which are worth another attempt, and when the turn must stop.

The loop engine already hands every failed tool result back to the model, which may call the
tool again; this module counts those attempts (Yao: "retry up to 3 attempts when errors are
retryable"). The policy:

* **retryable** — the server or the way to it had a problem that another attempt may not have:
  a transport failure (connection refused or dropped, the server process died), a timeout, an
  MCP protocol error other than the two below, and a result the server marked `isError`.
* **not retryable** — the call itself is wrong and would fail the same way again: a tool that
  is not offered (unknown, or outside the assistant's allowlist), arguments that violate the
  tool's input schema, and the server answering `METHOD_NOT_FOUND` / `INVALID_PARAMS`.

A retryable failure counts against its tool; a success resets that tool's count (the budget is
for *consecutive* failures). The turn stops when one tool has failed `max_retries` times in a row
(at least once), or at once on a non-retryable failure: `StopOnTrip`, the loop's model client,
then ends the loop between rounds. A tool reports its kind of failure in
`ToolResult.metadata` (`retryable`, `failure`); a failed result without that metadata counts as
retryable.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from pydantic import JsonValue

from orchestrator.llm.client import ModelClient
from orchestrator.llm.deltas import ModelDelta
from orchestrator.llm.messages import ModelRequest
from orchestrator.llm.tools.base import Tool, ToolBox, ToolContext, ToolResult

FailureKind = Literal["transport", "timeout", "protocol", "tool_error", "schema", "unknown_tool"]
RETRYABLE: frozenset[FailureKind] = frozenset({"transport", "timeout", "protocol", "tool_error"})


def failure(
    kind: FailureKind, message: str, *, server: str = "", retryable: bool | None = None
) -> ToolResult:
    """An error result tagged with its kind and whether another attempt may help."""
    again = kind in RETRYABLE if retryable is None else retryable
    if server:
        return ToolResult.error(message, failure=kind, retryable=again, server=server)
    return ToolResult.error(message, failure=kind, retryable=again)


@dataclass(frozen=True)
class Trip:
    """Why the retry budget stopped the turn."""

    tool: str
    call_id: str
    attempts: int
    retryable: bool
    message: str

    @property
    def reason(self) -> str:
        if not self.retryable:
            return f"tool {self.tool!r} failed and the error is not retryable: {self.message}"
        return f"tool {self.tool!r} failed {self.attempts} times in a row; last error: {self.message}"


class RetryGuard:
    """Counts consecutive failures per tool; `tripped` is set once the turn must stop."""

    def __init__(self, max_retries: int = 3) -> None:
        self.limit = max(1, max_retries)
        self._failures: dict[str, int] = {}
        self.tripped: Trip | None = None

    def attempts(self, tool: str) -> int:
        """Consecutive failures of `tool` so far."""
        return self._failures.get(tool, 0)

    def record(self, tool: str, call_id: str, result: ToolResult) -> ToolResult:
        """Account one finished call; returns the result with a note for the model on failures."""
        if not result.is_error:
            self._failures.pop(tool, None)
            return result
        retryable = result.metadata.get("retryable", True) is not False
        count = self._failures.get(tool, 0) + 1
        self._failures[tool] = count
        if not retryable:
            note = "This error is not retryable: do not call the tool this way again."
        elif count >= self.limit:
            note = f"Attempt {count} of {self.limit} failed; no attempts left."
        else:
            note = f"Attempt {count} of {self.limit} failed; you may correct the call and try again."
        if self.tripped is None and (not retryable or count >= self.limit):
            self.tripped = Trip(tool, call_id, count, retryable, _first_line(result.output))
        metadata = {**result.metadata, "attempt": count}
        return result.model_copy(update={"output": f"{result.output}\n[{note}]", "metadata": metadata})


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(no message)"
    return line if len(line) <= limit else line[: limit - 3] + "..."


class _Guarded:
    """A tool whose outcomes are recorded by a `RetryGuard`."""

    def __init__(self, tool: Tool, guard: RetryGuard) -> None:
        self._tool = tool
        self._guard = guard

    @property
    def name(self) -> str:
        return self._tool.name

    @property
    def description(self) -> str:
        return self._tool.description

    @property
    def read_only(self) -> bool:
        return self._tool.read_only

    @property
    def input_schema(self) -> dict[str, Any]:
        return self._tool.input_schema

    async def run(self, args: Mapping[str, JsonValue], ctx: ToolContext) -> ToolResult:
        result = await self._tool.run(args, ctx)
        return self._guard.record(self.name, ctx.tool_call_id, result)


class _Unknown:
    """Stands in for a tool the model named but was not offered: a non-retryable failure."""

    read_only = True
    description = "not an offered tool"

    def __init__(self, name: str, offered: Iterable[str], guard: RetryGuard) -> None:
        self.name = name
        self._offered = ", ".join(offered) or "none"
        self._guard = guard

    @property
    def input_schema(self) -> dict[str, Any]:
        return {"type": "object"}

    async def run(self, args: Mapping[str, JsonValue], ctx: ToolContext) -> ToolResult:
        result = failure("unknown_tool", f"unknown tool {self.name!r}; available: {self._offered}")
        return self._guard.record(self.name, ctx.tool_call_id, result)


class GuardedToolBox(ToolBox):
    """A `ToolBox` whose every call, including calls to tools it does not have, is counted."""

    def __init__(self, tools: Iterable[Tool], guard: RetryGuard) -> None:
        super().__init__(_Guarded(tool, guard) for tool in tools)
        self.guard = guard

    def get(self, name: str) -> Tool | None:
        return super().get(name) or _Unknown(name, self.names, self.guard)


class StopOnTrip:
    """A `ModelClient` for a loop whose tools a `RetryGuard` counts. Once the guard has tripped, the
    next model call never goes out: it sets `stop` (the loop's cancel event) and waits to be
    cancelled. The loop thus stops between rounds, with the failing call's result in its history
    and its stream."""

    def __init__(self, client: ModelClient, guard: RetryGuard, stop: anyio.Event) -> None:
        self._client = client
        self._guard = guard
        self._stop = stop

    @property
    def model(self) -> str:
        return self._client.model

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta]:
        if self._guard.tripped is not None:
            self._stop.set()
            await anyio.sleep_forever()
        async for delta in self._client.stream(request):
            yield delta

    async def aclose(self) -> None:
        await self._client.aclose()
