"""A user's own sessions: list, get, events, delete, answers, the websocket, and an SSE subscription.

The routes of one session (get, events, delete, answers) are the admin's too: `add_session_routes`
puts them on a router with the dependency that says whose session a request names (the caller's
own here, any owner's for an admin). No `from __future__ import annotations` here: FastAPI reads
those routes' parameter types at run time, and one of them is the router's own dependency.
"""

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query, WebSocket
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict

from orchestrator.api.answers import REQUEST_ID, Answered, PermissionAnswerBody, QuestionAnswerBody
from orchestrator.api.auth import Principal
from orchestrator.api.dependencies import CallerDep, SessionsDep, StateDep
from orchestrator.api.event_stream import sse_response, watched
from orchestrator.api.limits import MAX_SEQ, SESSION_ID
from orchestrator.api.session_socket import SocketParams, serve_session
from orchestrator.api.sessions import SessionService, SessionView, session_view, session_views
from orchestrator.errors import UsageError
from orchestrator.store import SessionRecord
from orchestrator.store.events import MAX_READ
from orchestrator.stream import Event, SSEEncoder

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])
SessionId = Annotated[str, Path(pattern=SESSION_ID)]
RequestId = Annotated[str, Path(pattern=REQUEST_ID)]


class EventPage(BaseModel):
    model_config = ConfigDict(frozen=True)
    events: list[Event]
    last_seq: int
    """Seq of the last event in this page (the `after_seq` of the next), or the one asked for."""


@router.get("", response_model=list[SessionView])
async def list_sessions(
    principal: CallerDep,
    sessions: SessionsDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    parent: Annotated[str | None, Query(pattern=SESSION_ID)] = None,
) -> list[SessionView]:
    """The caller's sessions; `?parent=<id>`: the sub-agent child sessions of that session."""
    return await session_views(sessions, await sessions.recent(principal, limit=limit, parent=parent))


@dataclass(frozen=True)
class Whose:
    """Who asks, and whose session the request names: the caller's own (`owner` None), or the
    `?owner=` an admin names."""

    principal: Principal
    owner: str | None = None


def own_sessions(principal: CallerDep) -> Whose:
    return Whose(principal)


def add_session_routes(router: APIRouter, whose: Callable[..., Any]) -> None:
    """Put the routes of one session on `router`; `whose` is the dependency that makes its `Whose`."""
    WhoseDep = Annotated[Whose, Depends(whose)]

    @router.get("/{session_id}", response_model=SessionView)
    async def get_session(session_id: SessionId, who: WhoseDep, sessions: SessionsDep) -> SessionView:
        return await session_view(sessions, await sessions.get(who.principal, session_id, owner=who.owner))

    @router.get("/{session_id}/events", response_model=EventPage, response_model_exclude_none=True)
    async def session_events(
        session_id: SessionId,
        who: WhoseDep,
        sessions: SessionsDep,
        after_seq: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_READ)] = 1000,
    ) -> EventPage:
        events = await sessions.events(who.principal, session_id, after_seq, limit, owner=who.owner)
        return EventPage(events=events, last_seq=events[-1].seq if events else after_seq)

    @router.delete("/{session_id}", status_code=204)
    async def delete_session(session_id: SessionId, who: WhoseDep, sessions: SessionsDep) -> None:
        await sessions.delete(who.principal, session_id, owner=who.owner)

    @router.post("/{session_id}/permissions/{request_id}", response_model=Answered)
    async def answer_permission(
        session_id: SessionId,
        request_id: RequestId,
        body: PermissionAnswerBody,
        who: WhoseDep,
        sessions: SessionsDep,
    ) -> Answered:
        """Answer a waiting `permission/request` (404 when none with that id waits); audited with the
        answering key."""
        await sessions.respond_permission(
            who.principal, session_id, request_id, body.decision, body.message, owner=who.owner
        )
        return Answered(request_id=request_id)

    @router.post("/{session_id}/questions/{request_id}", response_model=Answered)
    async def answer_question(
        session_id: SessionId,
        request_id: RequestId,
        body: QuestionAnswerBody,
        who: WhoseDep,
        sessions: SessionsDep,
    ) -> Answered:
        """Answer a waiting `question` (404 when none with that id waits)."""
        await sessions.respond_question(who.principal, session_id, request_id, body.answer, owner=who.owner)
        return Answered(request_id=request_id)


add_session_routes(router, own_sessions)


async def _subscription(
    sessions: SessionService, session: SessionRecord, after_seq: int
) -> AsyncIterator[str]:
    encoder = SSEEncoder()
    async for event in sessions.subscribe(session, after_seq):
        yield encoder.encode(event)


REVOKED_SSE = (
    "event: session.error\ndata: "
    + json.dumps({"code": "unauthorized", "message": "API key revoked"})
    + "\n\n"
)


@router.get("/{session_id}/stream", response_class=StreamingResponse)
async def follow_session(
    session_id: SessionId,
    principal: CallerDep,
    sessions: SessionsDep,
    state: StateDep,
    after_seq: Annotated[int | None, Query(ge=0, le=MAX_SEQ)] = None,
    last_event_id: Annotated[int | None, Header(ge=0, le=MAX_SEQ)] = None,
) -> StreamingResponse:
    """Every event after `after_seq` (or `Last-Event-ID`, or from now), then live, as SSE; a
    keep-alive comment in silences; the stream ends if the key is revoked."""
    session = await sessions.get(principal, session_id)
    start = (
        after_seq
        if after_seq is not None
        else last_event_id
        if last_event_id is not None
        else session.last_seq
    )
    if start > session.last_seq:
        raise UsageError(f"after_seq {start} is past the session's last_seq {session.last_seq}")
    state.caps.take("event stream", principal.owner)

    async def body() -> AsyncIterator[str]:
        try:
            async for item in watched(
                _subscription(sessions, session, start),
                keepalive=state.config.sse_keepalive_seconds,
                still_valid=lambda: state.auth.still_valid(principal),
                check_every=state.config.revocation_check_interval,
                revoked=REVOKED_SSE,
            ):
                yield item
        finally:
            state.caps.give_back("event stream", principal.owner)

    return sse_response(body())


class WsTicket(BaseModel):
    model_config = ConfigDict(frozen=True)
    ticket: str
    """Put it in the websocket URL as `?ticket=`; good for one connection."""
    expires_in: float
    """Seconds it stays valid."""


@router.post("/ws-ticket", response_model=WsTicket)
async def websocket_ticket(principal: CallerDep, state: StateDep) -> WsTicket:
    """Trade the API key (header) for a short-lived, single-use websocket ticket, so a browser never
    puts a key in a URL."""
    return WsTicket(ticket=await state.tickets.issue(principal), expires_in=state.tickets.ttl)


@router.websocket("/{session_id}/ws")
async def session_socket(
    websocket: WebSocket,
    session_id: str,
    state: StateDep,
    assistant_id: str | None = None,
    after_seq: str | None = None,
    ticket: str | None = None,
) -> None:
    """The session websocket; see docs/api.md for the frames. Parameters are checked after the
    handshake, so a bad one is answered with a `session.error` naming it and close code 4400."""
    await serve_session(websocket, state, SocketParams.of(session_id, assistant_id, after_seq), ticket)
