"""`CallRunner`: one call through the stages, for the turn's root and for every nested call.

stream_start → history → sandbox (before hooks, so they can use it) → Create hook (may rewrite
messages and options, or delegate) → the mode (`modes/`) → Next hook (may delegate or return data),
else the standard response → stream_end (the caller's `finish`: the root persists the turn with
it) → release the sandbox per lifecycle.

A failing stage ends the call with an `error` event and `stream_end` error; an interrupt ends it
with `stream_end` cancelled. Both release the sandbox. Nested calls (delegation, agent-to-agent)
run the same stages in a thread of their own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio
import structlog
from pydantic import ValidationError

from orchestrator.dsl.locales import request_locale
from orchestrator.dsl.localized import localized
from orchestrator.errors import CageError
from orchestrator.pipeline.attachments import with_attachments
from orchestrator.pipeline.call import Call, Stage
from orchestrator.pipeline.call_result import CallResult
from orchestrator.pipeline.callstack import CallKind
from orchestrator.pipeline.cancel import CancelSignal
from orchestrator.pipeline.contract import InputMessage
from orchestrator.pipeline.hooks.agents import AgentCaller
from orchestrator.pipeline.hooks.context import HookContext, HookSandbox
from orchestrator.pipeline.hooks.mcp import HookMcp
from orchestrator.pipeline.hooks.results import (
    IGNORED_CREATE_KEYS,
    CreateResult,
    Delegate,
    NextResult,
    parse_result,
)
from orchestrator.pipeline.modes import mode_for
from orchestrator.pipeline.options import CallOptions
from orchestrator.pipeline.stages.history import load_history
from orchestrator.pipeline.stages.sandbox import acquire_sandbox, release_sandbox
from orchestrator.redaction import redact
from orchestrator.stream import Event, TurnBuilder, Usage

log = structlog.get_logger(__name__)

Finish = Callable[[list[Event], CallResult], Awaitable[None]]
"""Emits a call's closing events (`stream_end`); the root's also persists the turn."""

RUNNER_GRACE = 20.0
"""Seconds a runner gets to stop after a graceful interrupt before its call is cancelled hard."""


class _Interrupted(Exception):
    """Raised between stages once an interrupt was requested."""


def _sum_usage(*usages: Usage | None) -> Usage | None:
    present = [u for u in usages if u is not None]
    if not present:
        return None
    total = present[0]
    for usage in present[1:]:
        total = total + usage
    return total.model_copy(update={"scope": "turn"})


class CallRunner:
    """Runs calls; `fork` and delegation nest new calls under a given one."""

    async def run(self, call: Call, finish: Finish) -> CallResult:
        """Run every stage of `call`; never raises for a failing stage (only cancellation)."""
        result: CallResult | None = None
        try:
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._enforce, call, scope)
                    try:
                        result = await self._stages(call)
                    finally:
                        tg.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._close(call, self._cancelled(call), finish)
            raise
        if result is None:
            result = self._cancelled(call)
        with anyio.CancelScope(shield=True):
            await self._close(call, result, finish)
        return result

    def _cancelled(self, call: Call) -> CallResult:
        return call.result("cancelled", usage=call.builder.turn_usage)

    async def _enforce(self, call: Call, scope: anyio.CancelScope) -> None:
        """Turn an interrupt into a stop: a runner first gets its graceful stop (until a forced
        interrupt or `RUNNER_GRACE`), anything else (hooks, model calls, sandbox set-up) is
        cancelled at once. The call's own signal fires for an ancestor's interrupt too."""
        await call.signal.wait()
        if call.stage in ("runner", "llm"):
            with anyio.move_on_after(RUNNER_GRACE):
                await call.signal.wait_forced()
        scope.cancel()

    async def _open(self, call: Call) -> None:
        """`stream_start`, once; a call cancelled before it ran still opens before it closes."""
        if call.started:
            return
        call.started = True
        assistant = call.assistant
        depth = call.stack.depth
        events = call.builder.stream_start(
            assistant.id,
            assistant_name=assistant.name,
            session_id=call.scope.session_id,
            metadata={"depth": depth, "kind": call.stack.kind} if depth else None,
        )
        with anyio.CancelScope(shield=True):  # half-written, the turn would have no beginning
            await call.emit(events)

    async def _close(self, call: Call, result: CallResult, finish: Finish) -> None:
        call.stage = "end"
        try:
            await self._open(call)
            end = call.builder.stream_end(result.status, error=result.error, usage=result.usage)
            await finish(end, result)
        finally:
            await release_sandbox(call, result.status)

    # -- stages ----------------------------------------------------------------------------------

    async def _stages(self, call: Call) -> CallResult:
        assistant = call.assistant
        await self._open(call)
        try:
            await load_history(call)
            if assistant.sandbox is not None:
                self._checkpoint(call, "sandbox")
                call.lease = await acquire_sandbox(call)
            elif call.scope.attachments and call.stack.kind == "root":
                # no box to put them in: the files travel in the user's message
                call.messages = with_attachments(call.messages, call.scope.attachments)
            ctx = self._context(call)
            self._checkpoint(call, "create")
            create = await self._create(call, ctx)
            if create.delegate is not None:
                return await self._delegate(call, create.delegate)
            if create.messages is not None:
                call.messages = create.messages
            call.options = call.options.with_overrides(create.overrides())
            # the request's (or Create's) locale picks the prompts' translations
            call.assistant = localized(call.assistant, request_locale(call.options.locale))
            self._checkpoint(call, "runner")
            mode = mode_for(call.assistant)
            result = await mode.run(call)
            if result.status == "cancelled" or call.signal.is_set():
                return self._cancelled(call)
            self._checkpoint(call, "next")
            return await self._next(call, ctx, result, completes=mode.completes)
        except _Interrupted:
            return self._cancelled(call)
        except (CageError, ValidationError) as exc:
            message = redact(str(exc))
            code = exc.code if isinstance(exc, CageError) else "invalid_options"
            log.info("pipeline.call_failed", assistant=assistant.id, stage=call.stage, code=code)
            await call.emit(call.builder.error(message, code))
            return call.result("error", error=message, usage=call.builder.turn_usage)

    def _checkpoint(self, call: Call, stage: Stage) -> None:
        if call.signal.is_set():
            raise _Interrupted
        call.stage = stage

    def _context(self, call: Call) -> HookContext:
        scope = call.scope
        sandbox = HookSandbox(scope.manager, call.lease) if call.lease is not None else None
        return HookContext(
            assistant_id=call.assistant.id,
            owner=scope.owner,
            session_id=scope.session_id,
            turn_id=scope.turn_id,
            thread_id=call.builder.thread_id,
            metadata={**scope.metadata, **call.options.metadata},
            locale=call.options.locale,
            builder=call.builder,
            emit=call.emit,
            memory=scope.memory,
            agent=AgentCaller(_CallLauncher(self, call)),
            sandbox=sandbox,
            mcp=HookMcp(call.assistant, allow_host_mcp=scope.allow_host_mcp),
        )

    async def _create(self, call: Call, ctx: HookContext) -> CreateResult:
        messages = [m.model_dump(mode="json", exclude_none=True) for m in call.messages]
        assistant = call.assistant
        outcome = await call.scope.hooks.invoke(assistant, "create", ctx, messages, call.options.for_hook())
        create = parse_result(CreateResult, outcome.value, assistant_id=assistant.id, hook="create")
        await self._warn_ignored(call, "create", outcome.dropped, create.ignored())
        return create

    async def _warn_ignored(
        self, call: Call, hook: str, dropped: Sequence[str], ignored: Sequence[str]
    ) -> None:
        """A `hook/ignored` warning for the Yao keys a hook returned that Cage does not act on."""
        aid = call.assistant.id
        if ignored:
            reasons = "; ".join(f"{k}: {IGNORED_CREATE_KEYS[k]}" for k in ignored)
            await call.emit(call.builder.hook_ignored(aid, hook, ignored, reasons))
        if dropped:
            reason = "Cage's hook results have no such keys"
            await call.emit(call.builder.hook_ignored(aid, hook, dropped, reason))

    async def _next(self, call: Call, ctx: HookContext, result: CallResult, *, completes: bool) -> CallResult:
        """The Next hook on the mode's result (`completion: null` when the mode ran nothing), then
        the call's result: the mode's, with the answer and usage as they stand after Next."""
        assistant = call.assistant
        payload = {
            "messages": [m.model_dump(mode="json", exclude_none=True) for m in call.messages],
            "completion": {
                "content": result.content,
                "status": result.status,
                "stop_reason": result.stop_reason,
            }
            if completes
            else None,
            "tools": list(call.transcript.tools),
            "tool_results": list(result.tool_results),
            "error": result.error,
        }
        outcome = await call.scope.hooks.invoke(assistant, "next", ctx, payload, call.options.for_hook())
        nxt = parse_result(NextResult, outcome.value, assistant_id=assistant.id, hook="next")
        await self._warn_ignored(call, "next", outcome.dropped, ())
        if nxt.delegate is not None:
            return await self._delegate(call, nxt.delegate)
        if nxt.data is not None or nxt.metadata is not None:
            await call.emit(call.builder.hook_next(assistant.id, data=nxt.data, metadata=nxt.metadata))
        return result.model_copy(
            update={
                "content": call.transcript.content,
                "usage": result.usage or call.builder.turn_usage,
                "data": nxt.data,
                "metadata": nxt.metadata,
                "thread_id": call.builder.thread_id,
            }
        )

    # -- nested calls ----------------------------------------------------------------------------

    async def _delegate(self, call: Call, delegate: Delegate) -> CallResult:
        """Hand the call to another assistant: its events nest under a thread; its answer is ours."""
        call.stage = "delegate"
        messages = delegate.messages or call.messages
        child = await self.nested(
            call, delegate.agent_id, messages, delegate.options, kind="delegate", signal=call.signal
        )
        result = await self.run(child, self.thread_finish(child))
        if result.status == "error":
            # The delegate's thread shows its error; the caller's stream_end repeats it.
            await call.emit(
                call.builder.error(f"delegate {delegate.agent_id}: {result.error}", "delegate_failed")
            )
        return result.model_copy(
            update={
                "usage": _sum_usage(call.builder.turn_usage, result.usage),
                "thread_id": call.builder.thread_id,
                "error": result.error,
            }
        )

    async def nested(
        self,
        parent: Call,
        agent_id: str,
        messages: Sequence[InputMessage],
        options: Mapping[str, Any],
        *,
        kind: CallKind,
        signal: CancelSignal,
    ) -> Call:
        """A nested call under `parent`.

        Raises:
            CallDepthError: the nesting is too deep (a cycle). NotFound, ConfigError: no such assistant.
        """
        assert kind != "root"
        stack = parent.stack.child(agent_id, kind)
        assistant = await parent.scope.authorize(agent_id)
        runner = assistant.sandbox.runner.name if assistant.sandbox is not None else None
        thread_id = parent.scope.ids.next_id("thread")
        opts = dict(options)
        call_options = (
            parent.options.forked(opts)
            if kind == "fork"
            else parent.options.with_overrides(
                {k: v for k, v in opts.items() if k in CallOptions.model_fields}
            )
        )
        return Call(
            scope=parent.scope,
            assistant=assistant,
            stack=stack,
            builder=TurnBuilder(parent.scope.ids, runner=runner, thread_id=thread_id),
            messages=tuple(messages),
            options=call_options,
            signal=signal,
            history_loaded=kind == "delegate" and parent.history_loaded,
        )

    def thread_finish(self, call: Call) -> Finish:
        """A nested call's finish: emit its `stream_end` into the turn."""

        async def finish(events: list[Event], result: CallResult) -> None:
            await call.emit(events)

        return finish


class _CallLauncher:
    """`Launcher` for `ctx.agent`: forked calls nested under one call."""

    def __init__(self, runner: CallRunner, call: Call) -> None:
        self._runner = runner
        self._call = call

    def signal(self) -> CancelSignal:
        return self._call.signal.child()

    async def fork(
        self,
        agent_id: str,
        messages: Sequence[InputMessage],
        options: Mapping[str, Any],
        signal: CancelSignal,
    ) -> CallResult:
        try:
            child = await self._runner.nested(
                self._call, agent_id, messages, options, kind="fork", signal=signal
            )
        except (CageError, ValidationError) as exc:
            return CallResult(assistant_id=agent_id, status="error", error=redact(str(exc)))
        return await self._runner.run(child, self._runner.thread_finish(child))
