"""LLM mode: one turn of an assistant with prompts and/or MCP servers and no sandbox.

`run_llm_turn` builds the system prompt (global prompts, then the assistant's prompts or the
chosen preset), the connector's client, and the turn's MCP toolset, and runs the native loop
(`AgentLoop`, at most `mcp.options.max_turn` rounds, `tool_call` events on). Failed tool calls
are counted by a `RetryGuard` (see `orchestrator.llm.mcp.retries` for what is retryable): when
one tool has failed `max_retries` times in a row, or fails in a way that is not retryable, the
loop is stopped and the turn counts as an `error`. With `next_handles_tools` (the assistant has a
Next hook) the loop runs one round, as with `tool_loop` off: the tool results go to Next (Yao).

When the loop ends in `max_rounds`, `tool_loop_terminated` or `error`, the turn is handed to the
fallback assistant (`assistant.fallback`, default `__yao.loop_fallback`): it gets a Markdown digest
of the attempt (system prompt, conversation, tool results) as its only user message, runs without
tools in a nested thread (`builder.child("fallback-…")` with its own `stream_start`/`stream_end`),
and its answer becomes the turn's content. If it fails too, the turn ends in error and says why.

Problems found before the loop (no usable connector, an unknown preset, an MCP server that
cannot be reached) end the turn in error without a hand-off. `run_llm_turn` reports failures in
its result and as `error` events; it does not raise them. The root `stream_start`/`stream_end`
belong to the caller, which should pass `result.usage` (fallback included) to `stream_end`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import structlog
from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from orchestrator.dsl import (
    AppLoader,
    Assistant,
    ConnectorSpec,
    McpServerRef,
    McpServerSpec,
    Prompt,
    expand_prompts,
)
from orchestrator.dsl.agentconfig import DEFAULT_FALLBACK, USE_PREFIX
from orchestrator.dsl.option_support import refuse_options
from orchestrator.errors import CageError, ConfigError, ToolError, UsageError
from orchestrator.llm import (
    AgentLoop,
    ChatMessage,
    CheckpointSink,
    CompactionPolicy,
    EventSink,
    LoopResult,
    LoopStop,
    ModelClient,
    ModelOptions,
    ToolResultBlock,
    client_for,
    client_settings,
    compaction_policy,
    model_options,
    package_model,
)
from orchestrator.llm.connections import ModelConnections
from orchestrator.llm.images import has_vision, image_from_part
from orchestrator.llm.mcp import GuardedToolBox, McpToolset, RetryGuard, StopOnTrip, handoff_digest
from orchestrator.llm.messages import ImageBlock, TextBlock
from orchestrator.llm.tools import ToolBox
from orchestrator.pipeline.contract import InputMessage
from orchestrator.pipeline.modes.vision_fallback import with_descriptions
from orchestrator.stream import Emit, ErrorEvent, Event, StreamStatus, TurnBuilder, Usage

log = structlog.get_logger(__name__)
T = TypeVar("T")

HANDOFF_STOPS: frozenset[LoopStop] = frozenset({"max_rounds", "tool_loop_terminated", "error"})
RUNNER = "mcp"
"""`runner` on the `execute` events of LLM-mode tool runs."""
_FROZEN = ConfigDict(frozen=True, extra="forbid")


class LlmTurnInput(BaseModel):
    """One LLM-mode turn: the assistant, the conversation, and the request's overrides.

    `messages` is the history plus the new user message(s), ending with a user prompt. Each may be
    a `ChatMessage`, a pipeline `InputMessage`, or a `{role, content}` dict (`content` a string or
    OpenAI-style parts); `system`/`developer` messages are moved into `system`.
    """

    model_config = _FROZEN
    assistant: Assistant
    messages: tuple[ChatMessage, ...] = Field(min_length=1)
    system: tuple[str, ...] = ()
    """Extra system text from the request, appended to the system prompt."""
    session_id: str = ""
    turn_id: str = ""
    connector: str | None = None
    """Connector id or `use::<role>` replacing the assistant's."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    prompt_preset: str | None = None
    """A preset of the assistant (`prompts/<preset>.yml`) used instead of its `prompts.yml`."""
    disable_global_prompts: bool = False
    global_prompts: tuple[Prompt, ...] = ()
    """The app's global prompts, put before the assistant's unless disabled (here or in the package)."""
    mcp_servers: tuple[McpServerRef | McpServerSpec, ...] = ()
    """Extra servers for this turn (a Create hook's `mcp_servers`); one with an id the assistant
    already uses replaces that entry. References are resolved through the loader."""
    allow_host_mcp: bool = False
    """Start stdio MCP servers on the orchestrator host (`CAGE_ALLOW_HOST_MCP`). Off by default:
    such a server runs outside every sandbox, with the orchestrator's network and files, driven by
    whatever the user prompts (SSRF to metadata and internal services, the host's own API)."""
    next_handles_tools: bool = False
    """The assistant has a Next hook: one round (the model's answer and the tools it called), and
    the tool results go to Next instead of back to the model (Yao's processNextResponse)."""
    resumed: tuple[ChatMessage, ...] = ()
    """The conversation of a crashed turn's last checkpoint (prompt examples included): the loop
    starts from it and the trailing user message(s) of `messages`, not from `messages`' history
    (`orchestrator.pipeline.modes.llm_checkpoints`)."""

    @model_validator(mode="before")
    @classmethod
    def _conversation(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or "messages" not in data:
            return data
        raw = data["messages"]
        items = [raw] if isinstance(raw, ChatMessage | InputMessage | Mapping) else list(raw)
        messages: list[ChatMessage] = []
        system = list(data.get("system", ()))
        for item in items:
            converted = _session_message(item)
            if isinstance(converted, str):
                system.append(converted)
            else:
                messages.append(converted)
        if messages and not messages[-1].is_prompt:
            raise ValueError("the conversation must end with a user message")
        return {**data, "messages": tuple(messages), "system": tuple(system)}


class LlmToolResult(BaseModel):
    """A tool call that ran, with what it returned."""

    model_config = _FROZEN
    call_id: str
    name: str
    arguments: dict[str, JsonValue]
    output: str
    is_error: bool
    failure: str | None = None
    """`transport`, `timeout`, `protocol`, `tool_error`, `schema` or `unknown_tool` when it failed."""
    retryable: bool | None = None
    attempt: int | None = None
    """Consecutive failures of this tool so far, for a failed call."""


class LlmTurnResult(BaseModel):
    """How an LLM-mode turn ended."""

    model_config = _FROZEN
    stop_reason: LoopStop
    """Why the assistant's own loop stopped (`error` also for a tripped retry budget or a setup
    problem); with a hand-off, the fallback's answer does not change it."""
    content: str = ""
    """The answer: the loop's final text, or the fallback's when it took over."""
    usage: Usage = Usage(scope="turn")
    """Tokens of the whole turn, fallback included."""
    tool_results: tuple[LlmToolResult, ...] = ()
    error: str | None = None
    """Set when the turn failed (the fallback, when used, failed too)."""
    fallback_used: bool = False
    fallback_assistant: str | None = None
    handoff_reason: str | None = None
    """Why the turn was handed to the fallback."""
    rounds: int = 0
    messages: tuple[ChatMessage, ...] = ()
    """The conversation after the loop (without the fallback's exchange)."""

    @property
    def status(self) -> StreamStatus:
        """What the caller's `stream_end` should say."""
        if self.stop_reason == "cancelled":
            return "cancelled"
        if self.error is not None:
            return "error"
        return "completed"


# -- the turn ------------------------------------------------------------------------------------


async def run_llm_turn(
    inp: LlmTurnInput,
    *,
    loader: AppLoader,
    builder: TurnBuilder,
    emit: Emit,
    cancel: anyio.Event | None = None,
    checkpoints: CheckpointSink | None = None,
    connections: ModelConnections | None = None,
) -> LlmTurnResult:
    """Run one LLM-mode turn, with the fallback hand-off. Emits no root `stream_start`/`stream_end`.
    `connections`: the model connections to share (the pipeline's), else the turn opens its own."""
    assistant = inp.assistant
    guard = RetryGuard(assistant.mcp_options.max_retries)
    stop = anyio.Event()
    tool_loop = assistant.mcp_options.tool_loop and not inp.next_handles_tools
    relay = _Relay(emit, drop_max_rounds=not tool_loop)
    sink = EventSink(relay)
    try:
        setup = await _prepare(
            assistant,
            loader,
            connector=inp.connector,
            temperature=inp.temperature,
            max_tokens=inp.max_tokens,
            preset=inp.prompt_preset,
            global_prompts=() if inp.disable_global_prompts else inp.global_prompts,
            extra_system=inp.system,
            connections=connections,
        )
        if not await _off_loop(loader, _vision, loader, assistant, inp.connector):
            described = await with_descriptions(
                inp.messages, assistant, loader, session_id=inp.session_id, connections=connections
            )
            inp = inp.model_copy(update={"messages": tuple(described)})
    except CageError as exc:
        return await _setup_failed(builder, sink, str(exc), inp.messages)
    try:
        servers = await _servers(inp, loader)
        loop_result = await _run_primary(inp, setup, servers, guard, stop, builder, sink, cancel, checkpoints)
    except ToolError as exc:  # a server could not be resolved or connected (tool calls never raise)
        return await _setup_failed(builder, sink, str(exc), inp.messages)
    finally:
        with anyio.CancelScope(shield=True):
            await setup.client.aclose()

    stop_reason, error = loop_result.stop_reason, loop_result.error
    caller_cancelled = cancel is not None and cancel.is_set()
    if guard.tripped is not None and not caller_cancelled:
        stop_reason, error = "error", guard.tripped.reason
        await sink(partial(builder.error, error, "tool_retries_exhausted", {"tool": guard.tripped.tool}))
    elif stop_reason == "max_rounds" and not tool_loop:
        stop_reason = "completed"  # tool_loop off or a Next hook: one round of tools is the turn (Yao)
    tools = _tool_results(loop_result)
    result = LlmTurnResult(
        stop_reason=stop_reason,
        content=loop_result.text,
        usage=loop_result.usage,
        tool_results=tools,
        error=error if stop_reason != "completed" and stop_reason != "cancelled" else None,
        rounds=loop_result.rounds,
        messages=loop_result.messages,
    )
    if stop_reason not in HANDOFF_STOPS:
        return result
    reason = _handoff_reason(stop_reason, error, assistant.mcp_options.max_turn)
    digest = handoff_digest(
        f"{assistant.name!r} (`{assistant.id}`)", setup.system, loop_result.messages, reason
    )
    fallback = await _hand_off(inp, loader, builder, sink, cancel, digest, reason, connections)
    return result.model_copy(
        update={
            "content": fallback.content if fallback.error is None else result.content,
            "usage": result.usage + fallback.usage,
            "error": None if fallback.error is None else fallback.error,
            "fallback_used": True,
            "fallback_assistant": fallback.assistant_id,
            "handoff_reason": reason,
        }
    )


async def _run_primary(
    inp: LlmTurnInput,
    setup: _Setup,
    servers: Sequence[McpServerSpec],
    guard: RetryGuard,
    stop: anyio.Event,
    builder: TurnBuilder,
    sink: EventSink,
    cancel: anyio.Event | None,
    checkpoints: CheckpointSink | None,
) -> LoopResult:
    options = inp.assistant.mcp_options
    async with McpToolset.open(servers) as toolset:
        loop = AgentLoop(
            StopOnTrip(setup.client, guard, stop),
            GuardedToolBox(toolset.tools, guard),
            system=setup.system,
            options=setup.options,
            max_rounds=options.max_turn if options.tool_loop and not inp.next_handles_tools else 1,
            tool_timeout=toolset.call_timeout + 10 if toolset.connections else 300.0,
            checkpoints=checkpoints,
            compaction=setup.compaction,
            runner=RUNNER,
            emit_tool_calls=True,
        )
        async with anyio.create_task_group() as tg:
            if cancel is not None:
                tg.start_soon(_forward, cancel, stop)
            start = (
                [*inp.resumed, *_new_prompts(inp.messages, inp.resumed)]
                if inp.resumed
                else [*setup.samples, *inp.messages]
            )
            result = await loop.run(
                start, builder, stop, emit=sink, session_id=inp.session_id, turn_id=inp.turn_id
            )
            tg.cancel_scope.cancel()
        return result


def _new_prompts(messages: Sequence[ChatMessage], resumed: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The trailing user prompts of `messages` that the `resumed` conversation does not hold
    already (the crashed turn's own prompts are in the stored history too)."""
    trailing = _prompt_run(messages, len(messages))
    last = max((i for i, m in enumerate(resumed) if m.is_prompt), default=-1)
    held = _prompt_run(resumed, last + 1)
    return trailing[len(held) :] if trailing[: len(held)] == held else trailing


def _prompt_run(messages: Sequence[ChatMessage], end: int) -> list[ChatMessage]:
    """The run of user prompts ending just before index `end`."""
    start = end
    while start > 0 and messages[start - 1].is_prompt:
        start -= 1
    return list(messages[start:end])


async def _forward(source: anyio.Event, target: anyio.Event) -> None:
    await source.wait()
    target.set()


class _Relay:
    """The emit the loop writes to. With `tool_loop` off, one round of tools is the plan, so the
    engine's `max_rounds` error is not passed on."""

    def __init__(self, emit: Emit, *, drop_max_rounds: bool) -> None:
        self._emit = emit
        self._drop_max_rounds = drop_max_rounds

    async def __call__(self, batch: Sequence[Event]) -> None:
        if self._drop_max_rounds:
            batch = [e for e in batch if not (isinstance(e, ErrorEvent) and e.props.code == "max_rounds")]
        if batch:
            await self._emit(batch)


async def _setup_failed(
    builder: TurnBuilder, sink: EventSink, message: str, messages: tuple[ChatMessage, ...]
) -> LlmTurnResult:
    log.warning("llm_turn.setup_failed", error=message)
    await sink(partial(builder.error, message, "llm_setup_failed"))
    return LlmTurnResult(stop_reason="error", error=message, messages=messages)


def _handoff_reason(stop: LoopStop, error: str | None, max_turn: int) -> str:
    if stop == "max_rounds":
        return f"the tool loop used all {max_turn} rounds without a final answer"
    if stop == "tool_loop_terminated":
        return "the model repeated the same tool call in consecutive rounds"
    return error or "the tool loop failed"


# -- building blocks -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Setup:
    system: str
    samples: tuple[ChatMessage, ...]
    """User/assistant messages of the prompts (examples), put before the conversation."""
    client: ModelClient
    options: ModelOptions
    compaction: CompactionPolicy | None = None


async def _prepare(
    assistant: Assistant,
    loader: AppLoader,
    *,
    connector: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    preset: str | None = None,
    global_prompts: Sequence[Prompt] = (),
    extra_system: Sequence[str] = (),
    connections: ModelConnections | None = None,
) -> _Setup:
    """System prompt, example messages, model client and options for `assistant`.

    Raises:
        UsageError: unknown preset, or no connector for the assistant.
        ConfigError | NotFound: the connector cannot be used or does not exist.
    """
    if preset:
        if preset not in assistant.presets:
            known = ", ".join(sorted(assistant.presets)) or "none"
            raise UsageError(f"assistant {assistant.id!r} has no prompt preset {preset!r} (presets: {known})")
        prompts = assistant.presets[preset]
    else:
        prompts = assistant.prompts
    if assistant.package.disable_global_prompts:
        global_prompts = ()
    every = expand_prompts(
        (*global_prompts, *prompts), environ=loader.environ, context={"assistant_id": assistant.id}
    )  # Yao's $SYS./$ENV./$CTX.
    system = "\n\n".join(
        [p.content for p in every if p.role in ("system", "developer") and p.content]
        + [s for s in extra_system if s]
    )
    samples = tuple(
        ChatMessage.user(p.content) if p.role == "user" else ChatMessage.assistant(p.content)
        for p in every
        if p.role in ("user", "assistant") and p.content
    )
    spec = await _off_loop(loader, _connector_spec, loader, assistant, connector)
    package = assistant.package.options
    refuse_options(assistant.file("package.yao"), assistant.package, None, spec.type.value)
    settings = client_settings(package_model(spec, package))
    options = model_options(spec, package)
    updates: dict[str, Any] = {}
    if temperature is not None:
        updates["temperature"] = temperature
    if max_tokens is not None:
        updates["max_tokens"] = max_tokens
    options = options.model_copy(update=updates)
    return _Setup(
        system=system,
        samples=samples,
        client=client_for(settings, connections),
        options=options,
        compaction=compaction_policy(spec, options, assistant.package.compaction),
    )


async def _off_loop(loader: AppLoader, fn: Callable[..., T], *args: object) -> T:
    """`fn(*args)`, a read of the app's configuration: on a thread while the app is still to be
    loaded from its files, at once (a dictionary look-up, no thread hop) once it is."""
    if loader.app_loaded:
        return fn(*args)
    return await anyio.to_thread.run_sync(fn, *args)


def _connector_spec(loader: AppLoader, assistant: Assistant, override: str | None) -> ConnectorSpec:
    """The `ConnectorSpec` to use (blocking: the loader may read files)."""
    conn_id = override or assistant.connector
    if conn_id and conn_id.startswith(USE_PREFIX):
        try:
            conn_id = loader.agent_config.role_connector(conn_id[len(USE_PREFIX) :])
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if not conn_id:
        raise UsageError(f"assistant {assistant.id!r} has no connector: set one, or roles.default")
    return loader.connector(conn_id)


async def _servers(inp: LlmTurnInput, loader: AppLoader) -> list[McpServerSpec]:
    """The assistant's MCP servers with the request's extra ones (resolved, replacing by id).

    Raises:
        ToolError: a referenced server does not load. ConfigError: a stdio server, not allowed here.
    """
    servers = {s.id: s for s in inp.assistant.mcp_servers}
    for extra in inp.mcp_servers:
        if isinstance(extra, McpServerSpec):
            servers[extra.id] = extra
            continue
        try:
            spec = await anyio.to_thread.run_sync(loader.mcp_server, extra.server_id)
        except CageError as exc:
            raise ToolError(f"mcp:{extra.server_id}", str(exc)) from exc
        servers[spec.id] = spec.model_copy(update={"tools": extra.tools, "resources": extra.resources})
    if not inp.allow_host_mcp:
        for spec in servers.values():
            if spec.transport == "stdio":
                raise ConfigError(
                    f"MCP server {spec.id!r} uses transport stdio, which in LLM mode would run "
                    f"{spec.command!r} on the orchestrator host, outside any sandbox; use an http MCP "
                    "server, or let trusted apps do this with CAGE_ALLOW_HOST_MCP=1",
                    file=inp.assistant.file("package.yao"),
                    key_path=f"mcp.servers.{spec.id}",
                )
    return list(servers.values())


def _tool_results(result: LoopResult) -> tuple[LlmToolResult, ...]:
    outputs: dict[str, ToolResultBlock] = {
        block.call_id: block for message in result.messages for block in message.tool_results
    }
    out: list[LlmToolResult] = []
    for step in result.steps:
        for trace in step.tools:
            block = outputs.get(trace.call_id)
            meta = trace.metadata
            failure, retryable, attempt = meta.get("failure"), meta.get("retryable"), meta.get("attempt")
            out.append(
                LlmToolResult(
                    call_id=trace.call_id,
                    name=trace.name,
                    arguments=trace.arguments,
                    output=block.output if block is not None else "",
                    is_error=trace.is_error,
                    failure=failure if isinstance(failure, str) else None,
                    retryable=retryable if isinstance(retryable, bool) else None,
                    attempt=attempt if isinstance(attempt, int) else None,
                )
            )
    return tuple(out)


def _session_message(item: Any) -> ChatMessage | str:
    """A conversation entry as a `ChatMessage`, or the text of a system message."""
    if isinstance(item, ChatMessage):
        return item
    if isinstance(item, InputMessage):
        role, content = item.role, item.content
    elif isinstance(item, Mapping):
        role, content = item.get("role", "user"), item.get("content", "")
    else:
        raise ValueError(
            f"a message must be a ChatMessage, an InputMessage or a {{role, content}} dict, "
            f"not {type(item).__name__}"
        )
    text = _text_of(content)
    if role in ("system", "developer"):
        return text
    if role == "user":
        images = _images_of(content)
        if images:
            return ChatMessage(role="user", content=(*((TextBlock(text=text),) if text else ()), *images))
        return ChatMessage.user(text)
    if role == "assistant":
        return ChatMessage.assistant(text)
    raise ValueError(f"unsupported message role {role!r} (use user, assistant or system)")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type", "text") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, Mapping) and image_from_part(part) is not None:
                continue  # an image block of its own (`_images_of`)
            elif isinstance(part, Mapping):
                parts.append(f"[{part.get('type')}]")
            else:
                parts.append(str(part))
        return "\n".join(parts)
    return "" if content is None else str(content)


def _images_of(content: Any) -> list[ImageBlock]:
    """The image parts of a message's content (OpenAI `image_url`, Anthropic `image`)."""
    if isinstance(content, str) or not isinstance(content, Sequence):
        return []
    found = (image_from_part(part) for part in content if isinstance(part, Mapping))
    return [image for image in found if image is not None]


def _vision(loader: AppLoader, assistant: Assistant, override: str | None) -> bool:
    """The turn's connector takes images (blocking: the loader may read files)."""
    return has_vision(_connector_spec(loader, assistant, override))


# -- the fallback --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _FallbackOutcome:
    assistant_id: str
    content: str = ""
    usage: Usage = field(default_factory=lambda: Usage(scope="turn"))
    error: str | None = None


async def _hand_off(
    inp: LlmTurnInput,
    loader: AppLoader,
    builder: TurnBuilder,
    sink: EventSink,
    cancel: anyio.Event | None,
    digest: str,
    reason: str,
    connections: ModelConnections | None,
) -> _FallbackOutcome:
    """Run the fallback assistant on the digest in a nested thread; never raises `CageError`."""
    fallback_id = inp.assistant.fallback or DEFAULT_FALLBACK
    child = builder.child(f"fallback-{secrets.token_hex(4)}")
    metadata: dict[str, JsonValue] = {"from_assistant": inp.assistant.id, "reason": reason}
    await sink(partial(child.stream_start, fallback_id, metadata=metadata))
    log.info("llm_turn.handoff", assistant=inp.assistant.id, fallback=fallback_id, reason=reason)
    outcome = _FallbackOutcome(fallback_id, error="the fallback was interrupted")
    status: StreamStatus = "cancelled"
    try:
        outcome = await _run_fallback(fallback_id, inp, loader, child, sink, cancel, digest, connections)
        status = "completed" if outcome.error is None else "error"
        if cancel is not None and cancel.is_set():
            status = "cancelled"
    finally:
        with anyio.CancelScope(shield=True):
            await sink(partial(child.stream_end, status, error=outcome.error, usage=outcome.usage))
    if outcome.error is not None:
        message = f"{reason}; the fallback assistant {fallback_id!r} failed too: {outcome.error}"
        await sink(partial(builder.error, message, "fallback_failed"))
        return _FallbackOutcome(fallback_id, usage=outcome.usage, error=message)
    return outcome


async def _run_fallback(
    fallback_id: str,
    inp: LlmTurnInput,
    loader: AppLoader,
    child: TurnBuilder,
    sink: EventSink,
    cancel: anyio.Event | None,
    digest: str,
    connections: ModelConnections | None,
) -> _FallbackOutcome:
    if fallback_id == inp.assistant.id:
        return _FallbackOutcome(fallback_id, error="an assistant cannot be its own fallback")
    try:
        fallback: Assistant = await anyio.to_thread.run_sync(loader.get, fallback_id)
        setup = await _prepare(fallback, loader, connections=connections)
    except CageError as exc:
        await sink(partial(child.error, str(exc), "fallback_unavailable"))
        return _FallbackOutcome(fallback_id, error=str(exc))
    try:
        loop = AgentLoop(
            setup.client,
            ToolBox(),
            system=setup.system,
            options=setup.options,
            max_rounds=1,
            runner=RUNNER,
            emit_tool_calls=True,
        )
        session = f"{inp.session_id}/fallback" if inp.session_id else ""
        result = await loop.run(
            [*setup.samples, ChatMessage.user(digest)],
            child,
            cancel,
            emit=sink,
            session_id=session,
            turn_id=inp.turn_id,
        )
    finally:
        with anyio.CancelScope(shield=True):
            await setup.client.aclose()
    if result.stop_reason != "completed" or not result.text.strip():
        why = result.error or f"it stopped with {result.stop_reason} and no answer"
        return _FallbackOutcome(fallback_id, usage=result.usage, error=why)
    return _FallbackOutcome(fallback_id, content=result.text, usage=result.usage)
