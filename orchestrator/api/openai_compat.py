"""The OpenAI chat-completions dialect: request models, and a turn's events as OpenAI answers.

The assistant is the `model`; the session comes from the `X-Cage-Session-Id` header or
`metadata.session_id` (a new session otherwise, its id returned in the `X-Cage-Session-Id` header).
Older names are still read: the `X-Cage-Chat-Id` header (and sent back beside the new one), and
`metadata.chat_id` (Yao's).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from orchestrator.api.auth import Principal
from orchestrator.api.limits import MAX_TOKENS, SESSION_ID
from orchestrator.api.sessions import SessionService
from orchestrator.api.turn_metrics import TurnMetrics
from orchestrator.dsl.locales import request_locale
from orchestrator.errors import UsageError
from orchestrator.pipeline import InputMessage, TurnHandle, TurnOptions
from orchestrator.store import SessionRecord
from orchestrator.stream import CompletionWithError, OpenAIChunkEncoder, aggregate_completion

SESSION_HEADER = "X-Cage-Session-Id"
LEGACY_SESSION_HEADER = "X-Cage-Chat-Id"
"""The session header's name before 2026-12 (and Yao's word, chat): read, and sent back beside
`SESSION_HEADER`, so clients written against it keep their session."""
TURN_HEADER = "X-Cage-Turn-Id"


class RequestMessage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, JsonValue]] | None = None
    name: str | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """OpenAI's request body; fields Cage does not use are accepted and ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    model: str = Field(min_length=1, max_length=128)
    """The assistant id (see `GET /v1/models`)."""
    messages: list[RequestMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    metadata: dict[str, str] | None = None
    """`session_id` continues a session; `workspace_id` picks the sandbox workspace."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)


class Model(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "cage"


class ModelList(BaseModel):
    model_config = ConfigDict(frozen=True)
    object: Literal["list"] = "list"
    data: list[Model]


class Interrupt(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    force: bool = False
    """False: stop gracefully, keep the session; True: kill the turn at once."""


def _input(message: RequestMessage) -> InputMessage:
    role = "system" if message.role == "developer" else message.role
    return InputMessage(role=role, content=message.content or "", name=message.name)


def session_id_for(request: ChatCompletionRequest, header: str | None) -> str:
    """Raises: UsageError for an id that cannot name a session."""
    metadata = request.metadata or {}
    chosen = header or metadata.get("session_id") or metadata.get("chat_id") or uuid.uuid4().hex
    if not re.fullmatch(SESSION_ID, chosen):
        raise UsageError(f"session id must match {SESSION_ID}")
    return chosen


def _locale(asked: object, accept_language: str | None) -> str | None:
    if not isinstance(asked, str) and not accept_language:
        return None
    return request_locale(asked if isinstance(asked, str) else None, accept_language)


async def start_completion(
    sessions: SessionService,
    principal: Principal,
    request: ChatCompletionRequest,
    session_header: str | None,
    accept_language: str | None = None,
) -> tuple[SessionRecord, TurnHandle]:
    """Open the session for `request` and start its turn; returns the session and the turn. Its
    locale is `metadata.locale` (as Yao's), else the `Accept-Language` header's.

    Raises:
        NotFound: unknown assistant (`model`) or another owner's session.
        Conflict: a turn is already running in the session, or it belongs to another assistant.
        CapacityError: past the owner's sandbox cap.
    """
    session = await sessions.open(principal, session_id_for(request, session_header), request.model)
    metadata = request.metadata or {}
    options = TurnOptions(
        temperature=request.temperature,
        max_tokens=request.max_completion_tokens or request.max_tokens,
        workspace_id=metadata.get("workspace_id"),
        locale=_locale(metadata.get("locale"), accept_language),
    )
    handle = await sessions.start(
        session, [_input(m) for m in request.messages], options=options, metadata=dict(metadata)
    )
    return session, handle


def headers_for(session: SessionRecord, handle: TurnHandle) -> dict[str, str]:
    """The session (the caller's id for it) and turn of a response."""
    shown = session.client_id
    return {SESSION_HEADER: shown, LEGACY_SESSION_HEADER: shown, TURN_HEADER: handle.turn_id}


async def completion_chunks(
    handle: TurnHandle, request: ChatCompletionRequest, turn_metrics: TurnMetrics
) -> AsyncIterator[str]:
    """The turn as `chat.completion.chunk` SSE, ending with `data: [DONE]`."""
    include_usage = request.stream_options.include_usage if request.stream_options else False
    encoder = OpenAIChunkEncoder(model=request.model, include_usage=include_usage)
    async for event in handle.events():
        turn_metrics.saw(event)
        text = encoder.encode(event)
        if text:
            yield text
    closing = encoder.close()
    if closing:
        yield closing


async def completion(
    handle: TurnHandle, request: ChatCompletionRequest, turn_metrics: TurnMetrics
) -> CompletionWithError:
    """The whole turn as one `chat.completion` (waits for `stream_end`)."""
    events = []
    async for event in handle.events():
        turn_metrics.saw(event)
        events.append(event)
    return aggregate_completion(events, model=request.model)
