"""Lifecycle events (`type: "event"`), told apart by `props.event`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, SerializeAsAny

from orchestrator.attribute_docs import describe_fields
from orchestrator.stream.content import ContentType, ExecuteProps, ToolCallProps
from orchestrator.stream.envelope import Envelope
from orchestrator.stream.usage import Usage

StreamStatus = Literal["completed", "error", "cancelled"]
SandboxPhase = Literal[
    "building", "pulling", "creating", "starting", "preparing", "ready", "stopping", "removed", "failed"
]


class _Props(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=describe_fields)


class StreamStart(_Props):
    """Opens a turn, or a nested call when the envelope has a `thread_id`."""

    event: Literal["stream_start"] = "stream_start"
    assistant_id: str
    assistant_name: str | None = None
    runner: str | None = None
    chat_id: str | None = None
    """The session's id under Yao's name for it (a Yao client reads `stream_start.chat_id`)."""
    metadata: SerializeAsAny[dict[str, JsonValue] | None] = None


class StreamEnd(_Props):
    """Closes a turn (or a nested call); the last event of it."""

    event: Literal["stream_end"] = "stream_end"
    status: StreamStatus = "completed"
    error: str | None = None
    """Why the turn failed; already redacted."""
    duration_ms: int = 0
    usage: Usage | None = None
    """The turn's usage when known."""


class MessageStart(_Props):
    event: Literal["message_start"] = "message_start"
    message_id: str
    type: ContentType


class MessageEnd(_Props):
    event: Literal["message_end"] = "message_end"
    message_id: str
    type: ContentType
    status: StreamStatus = "completed"
    """`completed` unless the window was cut short by an error or a cancel."""
    content: SerializeAsAny[str | ExecuteProps | ToolCallProps | None] = None
    """The full text of a text/thinking message, or the merged props of a tool run or model call."""
    duration_ms: int = 0
    chunk_count: int = 0


class TokenUsage(_Props):
    event: Literal["token/usage"] = "token/usage"
    usage: Usage


class ResultSummary(_Props):
    """The runner's own account of the turn (Claude's `result`, Codex's `turn.completed`...)."""

    event: Literal["result/summary"] = "result/summary"
    result: str | None = None
    is_error: bool = False
    num_turns: int | None = None
    duration_ms: int | None = None
    stop_reason: str | None = None
    """The model's last stop reason (`end_turn`, `max_tokens`...), as the runner reports it."""
    cost_usd: float | None = None
    usage: Usage | None = None
    runner_session_id: str | None = None
    """The CLI's own session id, kept so the next turn can resume it."""


class SandboxStatus(_Props):
    event: Literal["sandbox/status"] = "sandbox/status"
    phase: SandboxPhase
    message: str = ""
    progress: float | None = None
    """0.0 to 1.0 when the phase can tell."""
    sandbox_id: str | None = None


class EgressDenied(_Props):
    """The egress proxy refused a connection from the turn's sandbox (`computer.network`)."""

    event: Literal["sandbox/egress_denied"] = "sandbox/egress_denied"
    host: str
    """The host name (or IP) the sandbox asked for."""
    port: int | None = None
    method: str | None = None
    """`CONNECT` for a tunnel (HTTPS), else the HTTP method."""


class PermissionRequest(_Props):
    """The agent asks to use a tool the assistant's policy does not allow outright."""

    event: Literal["permission/request"] = "permission/request"
    request_id: str
    tool: str
    """Cage's canonical tool name (`bash`, `write`, `mcp:<server>/<tool>`...)."""
    tool_id: str | None = None
    input: SerializeAsAny[JsonValue] = None
    """The tool's arguments (long strings shortened)."""
    reason: str | None = None
    rule: str | None = None
    """The `permissions` rule that asked (`ask bash git push*`); None: the policy's mode."""
    deadline: str | None = None
    """When the policy's default applies if nobody answers (ISO 8601, UTC)."""


class PermissionResolved(_Props):
    """How a tool call was decided: by the user, by the policy's default on timeout, or by a rule
    (`by: policy` without a `permission/request` before it: only denials are reported so)."""

    event: Literal["permission/resolved"] = "permission/resolved"
    request_id: str
    decision: Literal["allow", "deny"]
    by: Literal["user", "policy", "timeout"] = "user"
    message: str | None = None
    tool: str | None = None
    tool_id: str | None = None
    rule: str | None = None
    """The rule that decided; for "allow always" the rule added to the session."""
    always: bool = False
    """The user allowed this call for the rest of the session."""


class QuestionAsked(_Props):
    """The agent asks its user something mid-turn; answer with a `question_response` frame."""

    event: Literal["question"] = "question"
    request_id: str
    text: str
    options: tuple[str, ...] = ()
    """Suggested answers, when the agent offers a choice."""
    tool_id: str | None = None
    deadline: str | None = None
    """When the question lapses with an empty answer (ISO 8601, UTC)."""


class QuestionAnswered(_Props):
    event: Literal["question/answered"] = "question/answered"
    request_id: str
    answer: str = ""
    by: Literal["user", "timeout", "policy"] = "user"
    """`timeout`: nobody answered by the deadline; `policy`: the turn ended or CI mode."""


class TurnStalled(_Props):
    """No output for `idle_ms`; the pipeline may cancel the turn after `stall_timeout`."""

    event: Literal["turn/stalled"] = "turn/stalled"
    idle_ms: int
    message: str = ""


class RunnerRaw(_Props):
    """A CLI message the translator does not know, forwarded instead of dropped."""

    event: Literal["runner/raw"] = "runner/raw"
    runner: str
    raw_type: str
    raw: SerializeAsAny[JsonValue] = None


class HookNext(_Props):
    """What the Next hook returned as `data` and `metadata` (Yao's `Response.next`), for the client."""

    event: Literal["hook/next"] = "hook/next"
    assistant_id: str
    data: SerializeAsAny[JsonValue] = None
    metadata: SerializeAsAny[dict[str, JsonValue] | None] = None


class HookIgnored(_Props):
    """A hook returned Yao keys Cage does not act on; the turn goes on without them."""

    event: Literal["hook/ignored"] = "hook/ignored"
    assistant_id: str
    hook: str
    keys: tuple[str, ...]
    reason: str


class SubagentStarted(_Props):
    """A sub-agent started in a child session of its own (its events are in that session's log)."""

    event: Literal["subagent/started"] = "subagent/started"
    session_id: str
    """The child session (`GET /v1/sessions/{id}/events`; listed under `?parent=`)."""
    name: str
    tool_id: str | None = None
    """The `agent` tool call that started it."""


class SubagentEnded(_Props):
    event: Literal["subagent/ended"] = "subagent/ended"
    session_id: str
    name: str
    status: StreamStatus = "completed"
    error: str | None = None


LifecycleProps = Annotated[
    StreamStart
    | StreamEnd
    | MessageStart
    | MessageEnd
    | TokenUsage
    | ResultSummary
    | SandboxStatus
    | EgressDenied
    | PermissionRequest
    | PermissionResolved
    | QuestionAsked
    | QuestionAnswered
    | TurnStalled
    | RunnerRaw
    | HookNext
    | HookIgnored
    | SubagentStarted
    | SubagentEnded,
    Field(discriminator="event"),
]


class LifecycleEvent(Envelope):
    type: Literal["event"] = "event"
    # `SerializeAsAny` (here, on the union and the JSON fields above and in content.py): written by
    # the value's own serializer, the same JSON without pydantic trying each member of the union,
    # at half the cost. Validation and the schema are unchanged (attribute docstrings would not be).
    props: SerializeAsAny[LifecycleProps]
