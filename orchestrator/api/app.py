"""`create_app(settings)`: the FastAPI application, its routers, and a lifespan owning everything.

Start: open the process's services (`open_services`), migrate the database, close the turns a dead
process left running (`orchestrator_restarted`), reconcile sandboxes left by a previous process,
start the reaper (background work runs under a `Supervisor`, so no exception in it can end the
server).
With several replicas on one database (`Cluster`), start-up recovery closes only the turns no live
replica holds, and reconcile, the reaper, the collectors and retention run on the elected leader.
Stop: running turns end with `stream_end` cancelled (`TurnService.aclose`: `CAGE_SHUTDOWN_GRACE`
graceful, then forced; `CageServer` does this before connections close), then the reaper stops and
`open_services` closes what it opened (the pipeline, the database, the engine clients).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from typing import Any

import anyio
import structlog
from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware

from orchestrator.api.auth import check_auth_mode
from orchestrator.api.cluster import Cluster
from orchestrator.api.config import ApiConfig
from orchestrator.api.errors import install_error_handlers
from orchestrator.api.gate import Gate
from orchestrator.api.metrics import Metrics
from orchestrator.api.openapi import install_openapi
from orchestrator.api.ratelimit import RateLimiter
from orchestrator.api.requestlog import RequestLog
from orchestrator.api.routers import completions, health, memory, sandboxes, sessions, streams, web
from orchestrator.api.routers.admin import assistants as admin_assistants
from orchestrator.api.routers.admin import audit as admin_audit
from orchestrator.api.routers.admin import images as admin_images
from orchestrator.api.routers.admin import sandboxes as admin_sandboxes
from orchestrator.api.routers.admin import sessions as admin_sessions
from orchestrator.api.routers.admin import teams as admin_teams
from orchestrator.api.state import ApiState
from orchestrator.api.supervisor import Supervisor
from orchestrator.errors import CageError, EngineUnavailable
from orchestrator.pipeline.recovery import RecoveredTurn, close_unfinished_turns
from orchestrator.pipeline.service import FORCE_GRACE
from orchestrator.sandbox import Reaper, reconcile
from orchestrator.sandbox.reconcile import ReconcileReport, kill_orphaned_turns
from orchestrator.sandbox.volumes import VolumeCollector
from orchestrator.services import Services, ServicesFactory, open_services
from orchestrator.settings import Settings
from orchestrator.store.retention import RetentionPolicy

log = structlog.get_logger(__name__)
VERSION = "0.1.0"


async def _reconcile(state: ApiState, cluster: Cluster | None = None) -> ReconcileReport:
    """Adopt the previous process's sandboxes. If the assistants cannot be listed, boxes with an
    assistant are left alone (reported unclaimed) rather than removed as unknown; with `cluster`,
    what other live replicas use is left alone too."""
    known: set[str] | None
    try:
        known = await state.catalog.known_ids()
    except Exception as exc:  # noqa: BLE001 - a broken app dir must not wipe the boxes
        log.error("assistants not listed: no sandbox will be removed as unknown", error=type(exc).__name__)
        known = None
    try:
        return await reconcile(
            state.services.manager,
            None if known is None else known.__contains__,
            in_use_elsewhere=cluster.in_use_elsewhere if cluster is not None else None,
        )
    except EngineUnavailable as exc:
        log.warning("sandboxes not reconciled: no container engine", error=str(exc))
        return ReconcileReport()


async def _lead(app: FastAPI, state: ApiState, cluster: Cluster) -> None:
    """This replica took the lead from a dead (or departed) one: adopt the engine's sandboxes."""
    app.state.reconcile = await _reconcile(state, cluster)


async def _sweep(state: ApiState, reaper: Reaper, shared: bool) -> None:
    """One reaper pass of the leader; on a shared database it first adopts the boxes other
    replicas made since, so it reaps those too (never one another replica's turn is using)."""
    if shared:
        try:
            known = await state.catalog.known_ids()
            await reconcile(state.services.manager, known.__contains__, adopt_only=True)
        except EngineUnavailable as exc:
            log.warning("sandboxes of other replicas not adopted: no container engine", error=str(exc))
    await reaper.sweep()


async def _kill_orphaned(state: ApiState, recovered: list[RecoveredTurn]) -> None:
    turns = [(t.owner, t.assistant_id, t.session_id) for t in recovered]
    await kill_orphaned_turns(state.services.manager, turns)


def _lifespan(
    factory: ServicesFactory, config: ApiConfig, metrics: Metrics
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        settings: Settings = app.state.settings
        async with factory(settings) as services, anyio.create_task_group() as tg:
            supervisor = Supervisor(tg)
            await services.store.migrate()
            services.store.sessions.bind(max_per_owner=config.max_sessions_per_owner)
            cluster = Cluster(services.store, settings, max_turns_per_owner=config.max_turns_per_owner)
            await cluster.join()
            await cluster.elect()
            recovered = await close_unfinished_turns(services.store, await cluster.startup_orphans())
            state = ApiState.build(services, config, metrics, supervisor)
            app.state.api = state
            app.state.cluster = cluster
            metrics.watch_cluster(cluster)
            state.auth.announce()
            app.state.reconcile = ReconcileReport()
            if cluster.leader:  # the other replicas leave the engine's sandboxes to the leader
                app.state.reconcile = await _reconcile(state, cluster)
            if recovered:  # the dead process's CLIs may still run in the boxes just adopted
                await _kill_orphaned(state, recovered)
            cluster.on_lead = functools.partial(_lead, app, state, cluster)
            cluster.on_recovered = functools.partial(_kill_orphaned, state)
            supervisor.every(cluster.heartbeat_seconds, cluster.heartbeat, name="replica-heartbeat")
            reaper = Reaper(services.manager, fleet=cluster.fleet if cluster.shared else None)
            if cluster.shared:  # one box per identity across replicas: create, reuse and reap under one lock
                services.manager.cluster_lock = services.store.leases.hold
            leading = cluster.leading  # the cluster's upkeep runs on the leader alone
            sweep = functools.partial(_sweep, state, reaper, cluster.shared)
            supervisor.every(reaper.interval, leading(sweep, name="reaper"), name="reaper")
            collect = leading(VolumeCollector(services.manager).collect, name="volume-gc")
            supervisor.every(reaper.interval, collect, name="volume-gc")
            networks = leading(services.manager.backend.sweep_networks, name="network-gc")
            supervisor.every(reaper.interval, networks, name="network-gc")
            pool = services.manager.start_pool(functools.partial(supervisor.spawn, name="warm-pool"))
            if pool is not None:  # every replica reaps its own pool (the reaper runs on the leader)
                supervisor.every(reaper.interval, pool.sweep, name="warm-pool-gc")
            policy = retention_policy(config, _agent_ttl(services))
            retention = leading(_retention(services, policy), name="retention")
            supervisor.every(config.retention_interval, retention, name="retention")
            supervisor.serving = True
            log.info("server ready", app_dir=str(settings.app_dir), replica_id=cluster.replica_id)
            try:
                yield
            finally:
                supervisor.serving = False
                await _shutdown(services, config)
                with anyio.CancelScope(shield=True):
                    await cluster.leave()
                if services.manager.pool is not None:  # its unclaimed boxes go with the server
                    await services.manager.pool.close()
                tg.cancel_scope.cancel()

    return lifespan


def retention_policy(config: ApiConfig, agent_ttl: int | None) -> RetentionPolicy:
    """The TTLs from the settings; `agent.yml` `store.ttl` is the session TTL when none is set."""

    def seconds(value: float | None) -> timedelta | None:
        return None if value is None else timedelta(seconds=value)

    session = config.session_ttl_seconds if config.session_ttl_seconds is not None else agent_ttl or None
    return RetentionPolicy(
        session_ttl=seconds(session),
        event_ttl=seconds(config.event_ttl_seconds),
        audit_ttl=seconds(config.audit_ttl_seconds),
    )


def _agent_ttl(services: Services) -> int | None:
    try:
        return services.loader.agent_config.store.ttl
    except CageError as exc:  # a broken agent.yml is reported by the turns that need it
        log.warning("agent.yml not read for store.ttl", error=str(exc))
        return None


def _retention(services: Services, policy: RetentionPolicy) -> Callable[[], Coroutine[Any, Any, None]]:
    async def sweep() -> None:
        swept = await services.store.retention.sweep(policy)
        if swept.sessions or swept.events or swept.audit:
            log.info("retention sweep", **swept.model_dump())

    return sweep


async def _shutdown(services: Services, config: ApiConfig) -> None:
    budget = config.shutdown_grace + 2 * FORCE_GRACE + 1.0  # what `aclose` itself takes at most
    with anyio.CancelScope(shield=True), anyio.move_on_after(budget) as scope:
        await services.turns.aclose()
    if scope.cancelled_caught:
        log.warning("turns did not all end within the shutdown grace", grace=config.shutdown_grace)


async def drain(app: FastAPI) -> None:
    """End every running turn (their `stream_end` reaches the live connections); the first step
    of a shutdown, before the server closes connections. Safe to call more than once."""
    state: ApiState | None = getattr(app.state, "api", None)
    if state is None:
        return
    state.supervisor.serving = False
    await _shutdown(state.services, state.config)
    await anyio.sleep(0.2)  # let the socket writers flush the closing events


def create_app(
    settings: Settings, *, services: ServicesFactory | None = None, config: ApiConfig | None = None
) -> FastAPI:
    """The Cage server for `settings`. `services` opens the process's services: by default
    `open_services` (the settings' engine and database, the turn pipeline); tests pass fakes.

    Raises:
        UsageError: authentication off on a non-loopback bind.
    """
    check_auth_mode(settings)
    api_config = config or ApiConfig()
    if services is None:  # running turns get the configured shutdown grace before they are forced
        services = functools.partial(open_services, close_grace=api_config.shutdown_grace)
    metrics = Metrics()
    app = FastAPI(
        title="Cage",
        version=VERSION,
        description="Sandboxed CLI-agent orchestrator: sessions, OpenAI-compatible chat, admin.",
        lifespan=_lifespan(services, api_config, metrics),
    )
    app.state.settings = settings
    for module in (
        health,
        sessions,
        memory,
        sandboxes,
        completions,
        streams,
        admin_assistants,
        admin_sandboxes,
        admin_images,
        admin_sessions,
        admin_teams,
        admin_audit,
        web,  # the session viewer at /ui/
    ):
        app.include_router(module.router)
    install_error_handlers(app)
    install_openapi(app)
    failures = RateLimiter(
        per_minute=api_config.failed_auth_per_minute,
        burst=api_config.failed_auth_burst,
        subject="this client address (too many failed requests)",
    )
    app.add_middleware(
        Gate,
        max_body_bytes=api_config.max_body_bytes,
        max_attachment_body_bytes=api_config.max_attachment_body_bytes,
        failures=failures,
    )
    if api_config.allowed_origins:  # opt-in: browsers on these origins may call the HTTP routes
        app.add_middleware(
            CORSMiddleware,
            allow_origins=api_config.allowed_origins,
            allow_methods=["GET", "POST", "PUT", "DELETE"],
            allow_headers=[
                "Authorization",
                "Content-Type",
                "X-Request-Id",
                "X-Cage-Session-Id",
                "X-Cage-Chat-Id",
                "Last-Event-ID",
            ],
            expose_headers=["X-Request-Id", "X-Cage-Session-Id", "X-Cage-Chat-Id", "X-Cage-Turn-Id"],
        )
    if api_config.trusted_hosts != ["*"]:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=api_config.trusted_hosts)
    app.add_middleware(RequestLog, metrics=metrics)
    return app
