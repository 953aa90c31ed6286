"""OpenAI-compatible chat: `POST /v1/chat/completions` (stream or not), `GET /v1/models`, interrupt."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict

from orchestrator.api.dependencies import CallerDep, CatalogDep, SessionsDep, StateDep
from orchestrator.api.event_stream import sse_response
from orchestrator.api.openai_compat import (
    LEGACY_SESSION_HEADER,
    SESSION_HEADER,
    ChatCompletionRequest,
    Interrupt,
    Model,
    ModelList,
    completion,
    completion_chunks,
    headers_for,
    start_completion,
)
from orchestrator.stream import CompletionWithError

router = APIRouter(prefix="/v1", tags=["openai"])
SessionHeader = Annotated[str | None, Header(alias=SESSION_HEADER)]
LegacySessionHeader = Annotated[
    str | None,
    Header(alias=LEGACY_SESSION_HEADER, deprecated=True, description=f"Old name of {SESSION_HEADER}."),
]


class TurnAccepted(BaseModel):
    """An interrupt was accepted for the turn (202)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    turn_id: str
    session_id: str
    force: bool = False


@router.get("/models", response_model=ModelList)
async def list_models(principal: CallerDep, catalog: CatalogDep) -> ModelList:
    """Assistants as OpenAI models: the `id` is what `model` takes."""
    return ModelList(
        data=[Model(id=a.id, owned_by=a.source) for a in await catalog.summaries() if a.mode != "invalid"]
    )


@router.post(
    "/chat/completions",
    response_model=CompletionWithError,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def chat_completions(
    body: ChatCompletionRequest,
    principal: CallerDep,
    state: StateDep,
    x_cage_session_id: SessionHeader = None,
    x_cage_chat_id: LegacySessionHeader = None,
    accept_language: Annotated[str | None, Header()] = None,
) -> JSONResponse | StreamingResponse:
    session, handle = await start_completion(
        state.sessions, principal, body, x_cage_session_id or x_cage_chat_id, accept_language
    )
    if body.stream:
        return sse_response(completion_chunks(handle, body, state.turn_metrics), headers_for(session, handle))
    answer = await completion(handle, body, state.turn_metrics)
    content = answer.model_dump(mode="json", exclude_none=True)
    if answer.cage_error is None:
        return JSONResponse(content, headers=headers_for(session, handle))
    # a failed turn is an error to an OpenAI client (HTTP 502 with OpenAI's error object), not a
    # 200 with finish_reason "stop"; what the turn produced before failing stays in the body
    failure = answer.cage_error
    content["error"] = {"message": failure.message, "type": failure.type, "param": None, "code": failure.code}
    # `x-should-retry: false`: OpenAI's clients retry a 5xx, and a retry would run the turn again
    headers = {**headers_for(session, handle), "x-should-retry": "false"}
    return JSONResponse(content, status_code=502, headers=headers)


@router.post("/chat/completions/{turn_id}/interrupt", response_model=TurnAccepted, status_code=202)
async def interrupt_turn(
    turn_id: str, principal: CallerDep, sessions: SessionsDep, body: Interrupt | None = None
) -> TurnAccepted:
    force = body.force if body else False
    session = await sessions.interrupt_turn(principal, turn_id, force=force)
    return TurnAccepted(turn_id=turn_id, session_id=session.client_id, force=force)
