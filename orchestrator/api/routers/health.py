"""Liveness, readiness and Prometheus metrics (no API key needed: keep them off the public edge)."""

from __future__ import annotations

from collections.abc import Awaitable

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from orchestrator.api.dependencies import StateDep
from orchestrator.api.metrics import CONTENT_TYPE
from orchestrator.errors import CageError
from orchestrator.redaction import redact

router = APIRouter(tags=["operations"])


class Health(BaseModel):
    model_config = ConfigDict(frozen=True)
    status: str


class Readiness(BaseModel):
    model_config = ConfigDict(frozen=True)
    status: str
    database: str
    engine: str


async def _probe(check: Awaitable[object]) -> str:
    try:
        await check
    except CageError as exc:
        return f"error: {redact(str(exc))}"
    return "ok"


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    return Health(status="ok")


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(state: StateDep) -> JSONResponse:
    rt = state.runtime
    ready = Readiness(
        status="ok",
        database=await _probe(rt.store.chats.get("readyz")),
        engine=await _probe(rt.manager.backend.ping()),
    )
    ok = ready.database == "ok" and ready.engine == "ok"
    body = ready.model_copy(update={"status": "ok" if ok else "unavailable"})
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


@router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE: {}}}})
async def metrics(state: StateDep) -> Response:
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)
