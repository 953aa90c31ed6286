"""What every wire API (Anthropic Messages, Chat Completions, Responses) provides to the app."""

from __future__ import annotations

import json
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from tests.fakes.model_server.reply import Conversation, Reply


class SseEvent(BaseModel):
    """One server-sent event: an optional `event:` name and one `data:` line."""

    model_config = ConfigDict(frozen=True)
    event: str | None = None
    data: str

    @classmethod
    def of(cls, event: str | None, payload: dict[str, Any]) -> SseEvent:
        return cls(event=event, data=json.dumps(payload, ensure_ascii=False))

    def encode(self) -> bytes:
        head = f"event: {self.event}\n" if self.event else ""
        return f"{head}data: {self.data}\n\n".encode()


class WireApi(Protocol):
    """One model API: how to read a request and render a reply or an error in its shape."""

    name: str

    def read(self, body: dict[str, Any]) -> Conversation: ...

    def events(self, reply: Reply, body: dict[str, Any]) -> list[SseEvent]: ...

    def response(self, reply: Reply) -> dict[str, Any]: ...

    def error(self, status: int, message: str) -> dict[str, Any]: ...


def text_of(content: Any) -> list[str]:
    """Texts in a message `content`: a string, or a list of parts with a `text` field."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return []


def openai_error_type(status: int) -> str:
    """The OpenAI error `type` for an HTTP status."""
    return {
        400: "invalid_request_error",
        401: "invalid_request_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_exceeded",
    }.get(status, "server_error")
