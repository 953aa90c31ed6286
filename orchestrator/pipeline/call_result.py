"""`CallResult`: how one call (the turn's root, a delegate, an agent-to-agent call) ended."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, JsonValue

from orchestrator.stream import StreamStatus, Usage


class CallResult(BaseModel):
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

    @property
    def ok(self) -> bool:
        return self.status == "completed" and self.error is None

    def for_hook(self) -> dict[str, Any]:
        """What `ctx.agent.call` returns: `{agent_id, content, response, error}`."""
        error = self.error or (None if self.status == "completed" else self.status)
        return {
            "agent_id": self.assistant_id,
            "content": self.content,
            "response": self.model_dump(mode="json"),
            "error": error,
        }
