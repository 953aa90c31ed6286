"""Stage 5, dispatch by mode: runner mode runs the CLI in the leased sandbox, LLM mode the native
loop, pure-hook mode nothing (the hooks do the work)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from pydantic import JsonValue

from orchestrator.dsl import AssistantMode, McpServerRef
from orchestrator.pipeline.attachments import image_parts, with_attachment_note
from orchestrator.pipeline.child_sessions import StoreChildSessions
from orchestrator.pipeline.contract import InputMessage
from orchestrator.pipeline.frame import CallFrame
from orchestrator.pipeline.llm_checkpoints import StoreCheckpoints, crashed_checkpoint
from orchestrator.pipeline.options import tightened
from orchestrator.pipeline.runner_turn import RunnerTurnInput, run_in_lease, turn_limits
from orchestrator.stream import StreamStatus, Usage


@dataclass(frozen=True)
class Completion:
    """What the mode produced; `ran` is False in pure-hook mode (Next gets `completion: null`)."""

    ran: bool
    status: StreamStatus = "completed"
    error: str | None = None
    stop_reason: str | None = None
    usage: Usage | None = None
    content: str | None = None
    """The answer when it is not the call's own text (a fallback assistant's); None: the text."""
    tool_results: tuple[dict[str, JsonValue], ...] = ()
    """LLM mode: the tool calls that ran (`call_id`, `name`, `arguments`, `output`, `is_error`);
    with a Next hook they are its to handle (Yao: the results go to Next, no automatic loop)."""


def message_text(message: InputMessage) -> str:
    """The text of a message: its string, or its text parts joined."""
    if isinstance(message.content, str):
        return message.content
    parts = []
    for part in message.content:
        text = part.get("text")
        parts.append(text if isinstance(text, str) else json.dumps(part))
    return "\n".join(parts)


def last_user_text(messages: tuple[InputMessage, ...]) -> str:
    """What a CLI runner is prompted with: the last user message (Yao does the same)."""
    for message in reversed(messages):
        if message.role == "user":
            return message_text(message)
    return message_text(messages[-1]) if messages else ""


async def dispatch(frame: CallFrame) -> Completion:
    """Run the assistant's mode for this call.

    Raises:
        ConfigError, SandboxError, ModelError: the mode could not run.
    """
    mode = frame.assistant.mode
    if mode is AssistantMode.RUNNER:
        return await _runner(frame)
    if mode is AssistantMode.LLM:
        return await _llm(frame)
    return Completion(ran=False)


async def _runner(frame: CallFrame) -> Completion:
    assert frame.lease is not None, "the sandbox is acquired before dispatch"
    scope = frame.scope
    assistant = frame.assistant
    if frame.options.connector:
        assistant = assistant.model_copy(update={"connector": frame.options.connector})
    attached = scope.attachments if frame.stack.kind == "root" else ()
    inp = RunnerTurnInput(
        assistant,
        with_attachment_note(last_user_text(frame.messages), attached, frame.lease.work_dir),
        images=image_parts(attached, frame.lease.work_dir),
        owner=scope.owner,
        chat_id=scope.chat_id,
        turn_id=scope.turn_id,
        workspace_id=frame.options.workspace_id,
        host_workspace=frame.options.host_workspace,
        child_sessions=StoreChildSessions(
            scope.store,
            owner=scope.owner,
            assistant_id=assistant.id,
            parent_chat_id=scope.chat_id,
            turn_id=scope.turn_id,
        ),
    )
    if scope.permissions is not None and assistant.sandbox is not None:
        gate = await scope.permissions.broker(
            assistant.sandbox.permissions,
            chat_id=scope.chat_id,
            turn_id=scope.turn_id,
            builder=frame.builder,
            emit=frame.emit,
            workspace=frame.lease.work_dir,
        )
        inp = replace(inp, gate=gate)
    limits = turn_limits(inp)
    if frame.options.turn_timeout is not None:
        timeout = tightened(frame.options.turn_timeout, limits.turn_timeout)
        limits = type(limits)(turn_timeout=timeout, stall_timeout=limits.stall_timeout)
    frame.stage = "runner"
    result = await run_in_lease(
        inp,
        frame.lease,
        loader=scope.loader,
        manager=scope.manager,
        gateway=scope.gateway,
        resume=scope.resume,
        builder=frame.builder,
        emit=frame.emit,
        cancel=frame.signal.graceful,
        limits=limits,
    )
    outcome = result.outcome
    return Completion(
        ran=True,
        status=outcome.status,
        error=outcome.error,
        stop_reason=outcome.stop_reason,
        usage=outcome.usage or frame.builder.turn_usage,
    )


async def _llm(frame: CallFrame) -> Completion:
    # Imported here: a runner turn never loads the model SDKs or MCP (issue 14).
    from orchestrator.pipeline.llm_turn import LlmTurnInput, run_llm_turn

    scope, options = frame.scope, frame.options
    root = frame.stack.kind == "root"
    crashed = (
        await crashed_checkpoint(scope.store, scope.chat_id, scope.turn_id, frame.assistant.id)
        if root
        else None
    )
    inp = LlmTurnInput(
        assistant=frame.assistant,
        messages=frame.messages,
        session_id=scope.chat_id,
        turn_id=scope.turn_id,
        connector=options.connector,
        temperature=options.temperature,
        max_tokens=options.max_tokens,
        prompt_preset=options.prompt_preset,
        disable_global_prompts=bool(options.disable_global_prompts),
        global_prompts=frame.assistant.global_prompts,
        mcp_servers=tuple(McpServerRef.model_validate(s) for s in options.mcp_servers or ()),
        allow_host_mcp=scope.allow_host_mcp,
        next_handles_tools=await scope.hooks.defines(frame.assistant, "next"),
        resumed=crashed.messages if crashed is not None else (),
    )
    frame.stage = "llm"
    resumed_from = crashed.turn_id if crashed is not None else None
    result = await run_llm_turn(
        inp,
        loader=scope.loader,
        builder=frame.builder,
        emit=frame.emit,
        cancel=frame.signal.graceful,
        checkpoints=StoreCheckpoints(scope.store, resumed_from=resumed_from) if root else None,
    )
    return Completion(
        ran=True,
        status=result.status,
        error=result.error,
        stop_reason=result.stop_reason,
        usage=result.usage,
        content=result.content if result.fallback_used else None,
        tool_results=tuple(
            t.model_dump(mode="json", include={"call_id", "name", "arguments", "output", "is_error"})
            for t in result.tool_results
        ),
    )
