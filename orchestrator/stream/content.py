"""Content events: what the agent says, thinks and does (`text`, `thinking`, `tool_call`,
`execute` and its semantic aliases, `loading`, `error`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, SerializeAsAny

from orchestrator.attribute_docs import describe_fields
from orchestrator.stream.envelope import Envelope
from orchestrator.stream.trusted import trusted_copy

ExecuteType = Literal["execute", "agent", "todo", "plan", "job", "question"]
"""`execute` and the semantic aliases a runner may pick for a tool run (a sub-agent, a todo list...)."""
EXECUTE_TYPES: tuple[ExecuteType, ...] = ("execute", "agent", "todo", "plan", "job", "question")

ContentType = Literal[
    "text", "thinking", "tool_call", "execute", "agent", "todo", "plan", "job", "question", "loading", "error"
]
"""Every content event type; also the `type` a message window is opened with."""

ToolStatus = Literal["running", "completed", "error"]


class _Props(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=describe_fields)


class TextProps(_Props):
    content: str
    """A fragment of the answer (delta) or the whole of it."""


class ThinkingProps(_Props):
    content: str


class ToolCallProps(_Props):
    """A model's function call in LLM mode, streamed: the first delta has `id` and `name`, the
    following ones append to `arguments`."""

    index: int = 0
    """The call's position in the model's batch of calls."""
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    """JSON text of the arguments, or the next fragment of it."""


class ExecuteProps(_Props):
    """One tool run by an agent. Deltas carry only what changed; `merged` folds them together."""

    tool_id: str
    tool: str | None = None
    """Tool name as the runner reports it (`Bash`, `Read`, `Task`...)."""
    input: SerializeAsAny[JsonValue] = None
    """The whole input, once known."""
    input_delta: str | None = None
    """The next fragment of the input's JSON text while it streams."""
    output: str | None = None
    status: ToolStatus | None = None
    is_error: bool | None = None
    exit_code: int | None = None
    summary: str | None = None
    """One line for humans, e.g. the command of a Bash call."""
    runner: str | None = None
    parent_tool_use_id: str | None = None
    """The sub-agent tool run this one belongs to, if any."""

    def merged(self, delta: ExecuteProps) -> ExecuteProps:
        """These props with a `merge` delta applied: present fields replace, `input_delta` appends."""
        update = {
            name: value
            for name, value in delta.__dict__.items()  # the fields, without pydantic's __iter__
            if value is not None and name not in ("input_delta", "tool_id")
        }
        if delta.input_delta:
            update["input_delta"] = (self.input_delta or "") + delta.input_delta
        return trusted_copy(self, **update)


class LoadingProps(_Props):
    message: str = ""
    done: bool = False
    """True on the last update: the indicator goes away."""


def _document_codes(schema: dict[str, Any]) -> None:
    from orchestrator.error_table import document_codes  # the codes are the error classes' own

    document_codes(schema)


class ErrorProps(_Props):
    message: str
    code: str = Field(json_schema_extra=_document_codes)
    """Machine-readable reason: a Cage error's stable code (`config_error`, `sandbox_not_found`, ...;
    docs/protocol.md, "Error codes"), `turn_timeout`, or a runner's own (`runner_failed`, ...)."""
    details: SerializeAsAny[dict[str, JsonValue] | None] = None


class TextEvent(Envelope):
    type: Literal["text"] = "text"
    props: TextProps


class ThinkingEvent(Envelope):
    type: Literal["thinking"] = "thinking"
    props: ThinkingProps


class ToolCallEvent(Envelope):
    type: Literal["tool_call"] = "tool_call"
    props: ToolCallProps


class ExecuteEvent(Envelope):
    type: ExecuteType = "execute"
    props: ExecuteProps


class LoadingEvent(Envelope):
    type: Literal["loading"] = "loading"
    props: LoadingProps


class ErrorEvent(Envelope):
    type: Literal["error"] = "error"
    props: ErrorProps
