"""Admin: sessions of any owner (list by owner, get, events, delete, answers).

Session ids are per owner, so every route names the owner (`?owner=`) as well as the session. The
routes of one session are the user's (`add_session_routes`), for the owner the admin names."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from orchestrator.api.dependencies import AdminDep, SessionsDep
from orchestrator.api.routers.sessions import Whose, add_session_routes
from orchestrator.api.sessions import SessionView, session_views

router = APIRouter(prefix="/v1/admin/sessions", tags=["admin"])
Owner = Annotated[str, Query(min_length=1, max_length=128, description="Whose session it is.")]


@router.get("", response_model=list[SessionView])
async def list_sessions(
    principal: AdminDep,
    sessions: SessionsDep,
    owner: Annotated[str, Query(min_length=1, description="Whose sessions.")],
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> list[SessionView]:
    return await session_views(sessions, await sessions.recent(principal, owner, limit))


def any_owners_sessions(principal: AdminDep, owner: Owner) -> Whose:
    return Whose(principal, owner)


add_session_routes(router, any_owners_sessions)
