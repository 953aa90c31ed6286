"""`ctx.agent`: agent-to-agent calls from a hook — `call`, and the batches `all`, `any`, `race`.

Every call is forked: it skips history, streams into the parent's turn under a thread id of its
own, and returns `{agent_id, content, response, error}`. Unlike Yao, `any` (first success) and
`race` (first result) cancel the calls still running instead of waiting for them: each loser's
thread ends `cancelled`, and a runner it started is stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import anyio
from pydantic import ValidationError

from orchestrator.errors import UsageError
from orchestrator.pipeline.call_result import CallResult
from orchestrator.pipeline.cancel import CancelSignal
from orchestrator.pipeline.contract import InputMessage
from orchestrator.pipeline.hooks.sync import dual


class Launcher(Protocol):
    """Runs a forked call under the current one (the pipeline's call runner)."""

    def signal(self) -> CancelSignal:
        """A signal under the current call's: set by its interrupt, or alone (a batch's loser)."""
        ...

    async def fork(
        self,
        agent_id: str,
        messages: Sequence[InputMessage],
        options: Mapping[str, Any],
        signal: CancelSignal,
    ) -> CallResult: ...


def call_messages(messages: object) -> tuple[InputMessage, ...]:
    """A user string, one message dict, or a list of them.

    Raises:
        UsageError: anything else.
    """
    if isinstance(messages, str):
        return (InputMessage(role="user", content=messages),)
    items = [messages] if isinstance(messages, Mapping) else messages
    if not isinstance(items, list | tuple) or not items:
        raise UsageError("agent calls take a message string, a message dict, or a non-empty list of them")
    try:
        return tuple(InputMessage.model_validate(m) for m in items)
    except ValidationError as exc:
        raise UsageError(f"agent call messages: {exc.errors()[0]['msg']}") from None


def _spec(item: object) -> tuple[str, object, Mapping[str, Any]]:
    if not isinstance(item, Mapping) or not isinstance(item.get("agent_id"), str):
        raise UsageError("batch agent calls take dicts with agent_id, messages and options")
    options = item.get("options") or {}
    if not isinstance(options, Mapping):
        raise UsageError("agent call options must be a dict")
    return item["agent_id"], item.get("messages", ""), options


class AgentCaller:
    """`ctx.agent` for one call."""

    def __init__(self, launcher: Launcher) -> None:
        self._launcher = launcher

    async def _run(
        self, agent_id: str, messages: object, options: Mapping[str, Any], signal: CancelSignal | None = None
    ) -> CallResult:
        signal = signal if signal is not None else self._launcher.signal()
        return await self._launcher.fork(agent_id, call_messages(messages), options, signal)

    @dual
    async def call(
        self, agent_id: str, messages: object, options: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Run one assistant and wait for it."""
        result = await self._run(agent_id, messages, options or {})
        return result.for_hook()

    @dual
    async def all(self, calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Run the calls side by side; every result, in the order of `calls`."""
        specs = [_spec(c) for c in calls]
        results: list[CallResult | None] = [None] * len(specs)

        async def one(index: int) -> None:
            agent_id, messages, options = specs[index]
            results[index] = await self._run(agent_id, messages, options)

        async with anyio.create_task_group() as tg:
            for index in range(len(specs)):
                tg.start_soon(one, index)
        return [r.for_hook() for r in results if r is not None]

    @dual
    async def any(self, calls: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The first call to succeed; the others are cancelled. When all fail, the last failure."""
        return await self._first(calls, lambda r: r.ok)

    @dual
    async def race(self, calls: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The first call to finish, however it ended; the others are cancelled."""
        return await self._first(calls, lambda r: r.status != "cancelled")

    async def _first(
        self, calls: Sequence[Mapping[str, Any]], accept: Callable[[CallResult], bool]
    ) -> dict[str, Any]:
        specs = [_spec(c) for c in calls]
        if not specs:
            raise UsageError("agent.any / agent.race need at least one call")
        signals = [self._launcher.signal() for _ in specs]
        winner: list[CallResult] = []
        others: list[CallResult] = []

        async def one(index: int) -> None:
            agent_id, messages, options = specs[index]
            result = await self._run(agent_id, messages, options, signals[index])
            if not winner and accept(result):
                winner.append(result)
                for other, signal in enumerate(signals):
                    if other != index:
                        signal.set()
            else:
                others.append(result)

        async with anyio.create_task_group() as tg:
            for index in range(len(specs)):
                tg.start_soon(one, index)
        return (winner or others[-1:])[0].for_hook()
