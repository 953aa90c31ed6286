"""`CallResult`: how one call (the turn's root, a delegate, an agent-to-agent call) ended.

The one result type: every `Mode` returns it, the Next stage completes it, and the root's is what
`TurnHandle.result()` gives the API and the CLI.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from orchestrator.redaction import redact
from orchestrator.stream import StreamStatus, Usage


class CallResult(BaseModel):
    """How a call ended; `content` is the assistant's final text (an OpenAI client's `message.content`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    assistant_id: str
    """The assistant that produced the answer (a delegate's, after a delegation)."""
    status: StreamStatus
    content: str = ""
    error: str | None = None
    stop_reason: str | None = None
    usage: Usage | None = None
    data: JsonValue = None
    metadata: dict[str, JsonValue] | None = None
    """What a Next hook returned as `metadata`."""
    thread_id: str | None = None
    tool_results: tuple[dict[str, JsonValue], ...] = Field(default=(), exclude=True)
    """LLM mode: the tool calls that ran (`call_id`, `name`, `arguments`, `output`, `is_error`);
    with a Next hook they are its to handle (Yao: the results go to Next, no automatic loop)."""

    @property
    def ok(self) -> bool:
        return self.status == "completed" and self.error is None

    def redacted(self) -> CallResult:
        """This result with its text and error redacted, for clients (the root's, as the turn's)."""
        return self.model_copy(
            update={
                "content": redact(self.content) if self.content else self.content,
                "error": redact(self.error) if self.error else self.error,
            }
        )

    def for_hook(self) -> dict[str, Any]:
        """What `ctx.agent.call` returns: `{agent_id, content, response, error}`."""
        error = self.error or (None if self.status == "completed" else self.status)
        return {
            "agent_id": self.assistant_id,
            "content": self.content,
            "response": self.model_dump(mode="json"),
            "error": error,
        }
