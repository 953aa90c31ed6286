"""Native SSE: `POST /v1/assistants/{assistant_id}/stream` runs a turn and streams its protocol events."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Path
from fastapi.responses import StreamingResponse
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from orchestrator.api.dependencies import CallerDep, StateDep
from orchestrator.api.event_stream import sse_response, watched
from orchestrator.api.frames import AttachmentFrame
from orchestrator.api.limits import MAX_TOKENS, MAX_TURN_SECONDS, SESSION_ID
from orchestrator.api.openai_compat import headers_for
from orchestrator.api.sessions import SessionService
from orchestrator.api.turn_metrics import TurnMetrics
from orchestrator.dsl.locales import request_locale
from orchestrator.pipeline import ClientOptions, InputMessage, TurnHandle, TurnOptions
from orchestrator.store import SessionRecord
from orchestrator.stream import SSEEncoder

router = APIRouter(prefix="/v1/assistants", tags=["stream"])


class RequestOptions(ClientOptions):
    """Per-turn overrides a network client may set (never a host path), within the server's limits."""

    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    workspace_id: str | None = Field(default=None, pattern=SESSION_ID)
    turn_timeout: float | None = Field(default=None, gt=0, le=MAX_TURN_SECONDS)

    def turn_options(self) -> TurnOptions:
        return TurnOptions(**self.model_dump())


class StreamRequest(BaseModel):
    """One turn: the user's message (or messages), optionally in an existing session."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    messages: list[InputMessage] = Field(min_length=1)
    session_id: str | None = Field(
        default=None, pattern=SESSION_ID, validation_alias=AliasChoices("session_id", "chat_id")
    )
    """Continue this session; a new one when absent (its id is in the `X-Cage-Session-Id` header).
    `chat_id`, its name before 2026-12, is still read."""
    attachments: list[AttachmentFrame] = Field(default_factory=list, max_length=32)
    options: RequestOptions = RequestOptions()


async def _events(
    sessions: SessionService, session: SessionRecord, handle: TurnHandle, turn_metrics: TurnMetrics
) -> AsyncIterator[str]:
    encoder = SSEEncoder()
    async for event in sessions.turn_events(session, handle):
        turn_metrics.saw(event)
        yield encoder.encode(event)


@router.post("/{assistant_id}/stream", response_class=StreamingResponse)
async def stream_turn(
    assistant_id: Annotated[str, Path(min_length=1, max_length=128)],
    body: StreamRequest,
    principal: CallerDep,
    state: StateDep,
    accept_language: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """The turn's locale is `options.locale`, else the `Accept-Language` header's."""
    sessions = state.sessions
    session = await sessions.open(principal, body.session_id or uuid.uuid4().hex, assistant_id)
    attachments = [a.attachment() for a in body.attachments]
    options = body.options.turn_options()
    if options.locale is None and accept_language:
        options = options.model_copy(update={"locale": request_locale(None, accept_language)})
    handle = await sessions.start(session, body.messages, attachments=attachments, options=options)
    events = watched(
        _events(sessions, session, handle, state.turn_metrics), keepalive=state.config.sse_keepalive_seconds
    )
    return sse_response(events, headers_for(session, handle))
