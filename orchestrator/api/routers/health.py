"""Liveness, readiness and Prometheus metrics (no API key needed: keep them off the public edge)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from orchestrator.api.dependencies import StateDep
from orchestrator.api.metrics import CONTENT_TYPE
from orchestrator.api.state import ApiState
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
    replica_id: str | None = None
    """This process's identity among the replicas sharing the database."""
    leader: bool = False
    """Whether this replica runs the cluster's upkeep (reaper, reconcile, dead replicas' turns)."""


class Probes:
    """Readiness checks that answer in bounded time: each runs as a supervised background task and
    the route waits at most `timeout` for it. A check still hanging from an earlier request is not
    started again (an engine call blocks a worker thread until the SDK's own timeout)."""

    def __init__(self) -> None:
        self._pending: set[str] = set()

    async def run(self, state: ApiState, name: str, check: Callable[[], Awaitable[object]]) -> str:
        timeout = state.config.readiness_timeout
        if name in self._pending:
            return f"error: no answer (an earlier check is still waiting after {timeout:g}s)"
        outcome: list[str] = []
        done = anyio.Event()

        async def probe() -> None:
            self._pending.add(name)
            try:
                await check()
                outcome.append("ok")
            except CageError as exc:
                outcome.append(f"error: {redact(str(exc))}")
            finally:
                self._pending.discard(name)
                done.set()

        state.supervisor.spawn(probe, name=f"readyz.{name}")
        with anyio.move_on_after(timeout):
            await done.wait()
        return outcome[0] if outcome else f"error: no answer within {timeout:g}s"


_probes = Probes()


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
async def healthz(request: Request) -> JSONResponse:
    """Alive: the runtime is up and its background work supervised (503 before start-up ends and
    once shutdown begins)."""
    state: ApiState | None = getattr(request.app.state, "api", None)
    serving = state is not None and state.supervisor.serving
    status = "ok" if serving else "unavailable"
    return JSONResponse(Health(status=status).model_dump(), status_code=200 if serving else 503)


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(request: Request, state: StateDep) -> JSONResponse:
    """Ready: the database and the engine answer, each within `CAGE_READINESS_TIMEOUT` seconds."""
    services = state.services
    database, engine = await _both(
        _probes.run(state, "database", lambda: services.store.sessions.get("readyz")),
        _probes.run(state, "engine", services.manager.backend.ping),
    )
    cluster = getattr(request.app.state, "cluster", None)
    replica = {"replica_id": cluster.replica_id, "leader": cluster.leader} if cluster is not None else {}
    ready = Readiness(status="ok", database=database, engine=engine, **replica)
    ok = ready.database == "ok" and ready.engine == "ok" and state.supervisor.serving
    body = ready.model_copy(update={"status": "ok" if ok else "unavailable"})
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


async def _both(first: Awaitable[str], second: Awaitable[str]) -> tuple[str, str]:
    results: dict[int, str] = {}

    async def put(i: int, aw: Awaitable[str]) -> None:
        results[i] = await aw

    async with anyio.create_task_group() as tg:
        tg.start_soon(put, 0, first)
        tg.start_soon(put, 1, second)
    return results[0], results[1]


@router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE: {}}}})
async def metrics(state: StateDep) -> Response:
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)
