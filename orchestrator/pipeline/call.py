"""The state a turn's calls share (`TurnScope`) and one call (`Call`), the input of its stages and mode."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

from orchestrator.dsl import AppLoader, Assistant
from orchestrator.gateway import ModelGateway
from orchestrator.llm.connections import ModelConnections
from orchestrator.permissions import PermissionGate
from orchestrator.pipeline.call_result import CallResult
from orchestrator.pipeline.callstack import CallStack
from orchestrator.pipeline.cancel import CancelSignal
from orchestrator.pipeline.contract import Attachment, InputMessage
from orchestrator.pipeline.hooks.memory import HookMemory
from orchestrator.pipeline.hooks.modules import HookModules
from orchestrator.pipeline.options import CallOptions
from orchestrator.pipeline.permissions import Permissions
from orchestrator.pipeline.resume import ResumeStore
from orchestrator.pipeline.transcript import CallTranscript
from orchestrator.sandbox.manager import SandboxLease, SandboxManager
from orchestrator.store import Store
from orchestrator.stream import Emit, Event, IdSource, StreamStatus, TurnBuilder, Usage

Authorize = Callable[[str], Awaitable[Assistant]]
Stage = Literal["start", "history", "sandbox", "create", "runner", "llm", "next", "delegate", "end"]


@dataclass
class TurnScope:
    """Everything the calls of one turn share."""

    owner: str
    session_id: str
    turn_id: str
    metadata: dict[str, object]
    loader: AppLoader
    manager: SandboxManager
    store: Store
    resume: ResumeStore
    hooks: HookModules
    memory: HookMemory
    ids: IdSource
    emit: Emit
    """Stamps, logs and fans out (the session hub); every call's events go through it."""
    authorize: Authorize
    gateway: ModelGateway
    """Issues the per-turn tokens runners use instead of the connector's key."""
    attachments: tuple[Attachment, ...] = ()
    """The user's files: written into the root call's sandbox before its hooks run."""
    allow_host_mcp: bool = False
    """LLM-mode stdio MCP servers may run on the orchestrator host (`Settings.allow_host_mcp`)."""
    permissions: Permissions | None = None
    """Makes each runner call's permission broker and takes the clients' answers."""
    connections: ModelConnections | None = None
    """The model connections LLM-mode calls share (the pipeline's)."""


@dataclass
class Call:
    """One call on the stack: its assistant, messages, options, builder, sandbox and interrupt.

    The one input of a call's stages and of its `Mode`; what they learn on the way (the lease, the
    stage, the history) is set on it.
    """

    scope: TurnScope
    assistant: Assistant
    stack: CallStack
    builder: TurnBuilder
    messages: tuple[InputMessage, ...]
    options: CallOptions
    signal: CancelSignal
    transcript: CallTranscript = field(init=False)
    lease: SandboxLease | None = None
    gate: PermissionGate | None = None
    """The call's permission broker (`sandbox.yao` `permissions`); runners ask it before a tool runs."""
    stage: Stage = "start"
    started: bool = False
    """True once `stream_start` went out."""
    history_loaded: bool = False

    def __post_init__(self) -> None:
        self.transcript = CallTranscript(self.builder.thread_id)

    def result(
        self,
        status: StreamStatus,
        *,
        error: str | None = None,
        stop_reason: str | None = None,
        usage: Usage | None = None,
        tool_results: tuple[dict[str, JsonValue], ...] = (),
    ) -> CallResult:
        """This call's result: its assistant, its answer so far, its thread."""
        return CallResult(
            assistant_id=self.assistant.id,
            status=status,
            content=self.transcript.content,
            error=error,
            stop_reason=stop_reason,
            usage=usage,
            thread_id=self.builder.thread_id,
            tool_results=tool_results,
        )

    async def emit(self, events: Sequence[Event]) -> None:
        self.transcript.observe(events)
        await self.scope.emit(events)
