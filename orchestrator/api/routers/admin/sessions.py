"""Admin: sessions of any owner (list by owner, get, events, delete).

Session ids are per owner, so every route names the owner (`?owner=`) as well as the session."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from orchestrator.api.answers import REQUEST_ID, Answered, PermissionAnswerBody, QuestionAnswerBody
from orchestrator.api.dependencies import AdminDep, SessionsDep
from orchestrator.api.limits import CHAT_ID, MAX_SEQ
from orchestrator.api.routers.sessions import EventPage
from orchestrator.api.sessions import SessionView, session_view, session_views
from orchestrator.store.events import MAX_READ

router = APIRouter(prefix="/v1/admin/sessions", tags=["admin"])
ChatId = Annotated[str, Path(pattern=CHAT_ID)]
Owner = Annotated[str, Query(min_length=1, max_length=128, description="Whose session it is.")]
RequestId = Annotated[str, Path(pattern=REQUEST_ID)]


@router.get("", response_model=list[SessionView])
async def list_sessions(
    principal: AdminDep,
    sessions: SessionsDep,
    owner: Annotated[str, Query(min_length=1, description="Whose sessions.")],
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> list[SessionView]:
    return await session_views(sessions, await sessions.sessions(principal, owner, limit))


@router.get("/{chat_id}", response_model=SessionView)
async def get_session(
    chat_id: ChatId, owner: Owner, principal: AdminDep, sessions: SessionsDep
) -> SessionView:
    return await session_view(sessions, await sessions.get(principal, chat_id, owner=owner))


@router.get("/{chat_id}/events", response_model=EventPage, response_model_exclude_none=True)
async def session_events(
    chat_id: ChatId,
    owner: Owner,
    principal: AdminDep,
    sessions: SessionsDep,
    after_seq: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_READ)] = 1000,
) -> EventPage:
    events = await sessions.events(principal, chat_id, after_seq, limit, owner=owner)
    return EventPage(events=events, last_seq=events[-1].seq if events else after_seq)


@router.delete("/{chat_id}", status_code=204)
async def delete_session(
    chat_id: ChatId, owner: Owner, principal: AdminDep, sessions: SessionsDep
) -> None:
    await sessions.delete(principal, chat_id, owner=owner)


@router.post("/{chat_id}/permissions/{request_id}", response_model=Answered)
async def answer_permission(
    chat_id: ChatId,
    request_id: RequestId,
    body: PermissionAnswerBody,
    owner: Owner,
    principal: AdminDep,
    sessions: SessionsDep,
) -> Answered:
    """Answer a waiting `permission/request` of any owner's session (audited with the admin's key)."""
    await sessions.respond_permission(
        principal, chat_id, request_id, body.decision, body.message, owner=owner
    )
    return Answered(request_id=request_id)


@router.post("/{chat_id}/questions/{request_id}", response_model=Answered)
async def answer_question(
    chat_id: ChatId,
    request_id: RequestId,
    body: QuestionAnswerBody,
    owner: Owner,
    principal: AdminDep,
    sessions: SessionsDep,
) -> Answered:
    """Answer a waiting `question` of any owner's session."""
    await sessions.respond_question(principal, chat_id, request_id, body.answer, owner=owner)
    return Answered(request_id=request_id)
