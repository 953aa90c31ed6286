"""FastAPI dependencies: services from `app.state.api`, and the caller (`Principal`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.requests import HTTPConnection

from orchestrator.api.auth import Principal
from orchestrator.api.catalog import Catalog
from orchestrator.api.errors import KeyRateLimited
from orchestrator.api.gate import principal_of
from orchestrator.api.images import ImageService
from orchestrator.api.sandboxes import SandboxService
from orchestrator.api.sessions import SessionService
from orchestrator.api.state import ApiState
from orchestrator.store import Store

_bearer = HTTPBearer(auto_error=False, description="An API key from `cage keys create`.")


def api_state(conn: HTTPConnection) -> ApiState:
    state: ApiState = conn.app.state.api
    return state


StateDep = Annotated[ApiState, Depends(api_state)]


async def authenticate(state: ApiState, token: str | None) -> Principal:
    try:
        return await state.auth.authenticate(token)
    except KeyRateLimited:
        state.metrics.rate_limited.inc()
        raise


async def caller(
    request: Request, state: StateDep, creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    """The principal the `Gate` authenticated before the body was read; routes it did not cover
    (none today) authenticate here."""
    principal = principal_of(request.scope)
    if principal is None:
        principal = await authenticate(state, creds.credentials if creds else None)
    return principal


async def admin(principal: Annotated[Principal, Depends(caller)]) -> Principal:
    principal.require_admin()
    return principal


def bearer_token(conn: HTTPConnection) -> str | None:
    """The token of an `Authorization: Bearer` header (websockets cannot use `HTTPBearer`)."""
    scheme, _, token = conn.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


CallerDep = Annotated[Principal, Depends(caller)]
AdminDep = Annotated[Principal, Depends(admin)]


def _catalog(state: StateDep) -> Catalog:
    return state.catalog


def _sessions(state: StateDep) -> SessionService:
    return state.sessions


def _sandboxes(state: StateDep) -> SandboxService:
    return state.sandboxes


def _images(state: StateDep) -> ImageService:
    return state.images


def _store(state: StateDep) -> Store:
    return state.services.store


CatalogDep = Annotated[Catalog, Depends(_catalog)]
SessionsDep = Annotated[SessionService, Depends(_sessions)]
SandboxesDep = Annotated[SandboxService, Depends(_sandboxes)]
ImagesDep = Annotated[ImageService, Depends(_images)]
StoreDep = Annotated[Store, Depends(_store)]
