"""The stream protocol (v1): event models, the turn builder, the session emitter, encoders.

Everything a producer (runner translator, native loop, pipeline) or a consumer (API, CLI, tests)
needs is exported here; import from `orchestrator.stream`, not from its modules.
"""

from orchestrator.stream.builder import TurnBuilder
from orchestrator.stream.content import (
    ContentType,
    ErrorEvent,
    ErrorProps,
    ExecuteEvent,
    ExecuteProps,
    ExecuteType,
    LoadingEvent,
    LoadingProps,
    TextEvent,
    TextProps,
    ThinkingEvent,
    ThinkingProps,
    ToolCallEvent,
    ToolCallProps,
    ToolStatus,
)
from orchestrator.stream.emitter import SessionEmitter
from orchestrator.stream.encoders import (
    CompletionWithError,
    EventEncoder,
    JSONLEncoder,
    OpenAIChunkEncoder,
    SSEEncoder,
    WebSocketEncoder,
    aggregate_completion,
    encode_all,
    parse_jsonl,
)
from orchestrator.stream.envelope import DeltaAction, Envelope
from orchestrator.stream.events import Event, EventAdapter, dump_event, event_json, parse_event
from orchestrator.stream.ids import CountingIds, IdSource, RandomIds
from orchestrator.stream.lifecycle import (
    LifecycleEvent,
    LifecycleProps,
    MessageEnd,
    MessageStart,
    PermissionRequest,
    PermissionResolved,
    ResultSummary,
    RunnerRaw,
    SandboxPhase,
    SandboxStatus,
    StreamEnd,
    StreamStart,
    StreamStatus,
    TokenUsage,
    TurnStalled,
)
from orchestrator.stream.schema import protocol_schema, render_schema
from orchestrator.stream.usage import Usage, UsageScope
from orchestrator.stream.validator import check_stream, validate_stream

__all__ = [
    "CompletionWithError",
    "ContentType",
    "CountingIds",
    "DeltaAction",
    "Envelope",
    "ErrorEvent",
    "ErrorProps",
    "Event",
    "EventAdapter",
    "EventEncoder",
    "ExecuteEvent",
    "ExecuteProps",
    "ExecuteType",
    "IdSource",
    "JSONLEncoder",
    "LifecycleEvent",
    "LifecycleProps",
    "LoadingEvent",
    "LoadingProps",
    "MessageEnd",
    "MessageStart",
    "OpenAIChunkEncoder",
    "PermissionRequest",
    "PermissionResolved",
    "RandomIds",
    "ResultSummary",
    "RunnerRaw",
    "SSEEncoder",
    "SandboxPhase",
    "SandboxStatus",
    "SessionEmitter",
    "StreamEnd",
    "StreamStart",
    "StreamStatus",
    "TextEvent",
    "TextProps",
    "ThinkingEvent",
    "ThinkingProps",
    "TokenUsage",
    "ToolCallEvent",
    "ToolCallProps",
    "ToolStatus",
    "TurnBuilder",
    "TurnStalled",
    "Usage",
    "UsageScope",
    "WebSocketEncoder",
    "aggregate_completion",
    "check_stream",
    "dump_event",
    "encode_all",
    "event_json",
    "parse_event",
    "parse_jsonl",
    "protocol_schema",
    "render_schema",
    "validate_stream",
]
