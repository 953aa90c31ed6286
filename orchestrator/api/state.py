"""`ApiState`: the runtime plus the API's own services, built once in the lifespan and read by
the routers' dependencies from `app.state.api`."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.api.auth import Authenticator
from orchestrator.api.caps import OwnerCaps
from orchestrator.api.catalog import Catalog
from orchestrator.api.config import ApiConfig
from orchestrator.api.images import ImageService
from orchestrator.api.memories import Memories
from orchestrator.api.metrics import Metrics
from orchestrator.api.ratelimit import KeyLimiter, RateLimiter, SharedRateLimiter
from orchestrator.api.runtime import Runtime
from orchestrator.api.sandboxes import SandboxService
from orchestrator.api.sessions import SessionService
from orchestrator.api.supervisor import Supervisor
from orchestrator.api.tickets import SharedTickets, Tickets, WsTickets
from orchestrator.api.turn_metrics import TurnMetrics


@dataclass(frozen=True)
class ApiState:
    runtime: Runtime
    config: ApiConfig
    metrics: Metrics
    limiter: KeyLimiter
    auth: Authenticator
    catalog: Catalog
    turn_metrics: TurnMetrics
    sessions: SessionService
    sandboxes: SandboxService
    images: ImageService
    memories: Memories
    supervisor: Supervisor
    caps: OwnerCaps
    tickets: WsTickets

    @classmethod
    def build(cls, runtime: Runtime, config: ApiConfig, metrics: Metrics, supervisor: Supervisor) -> ApiState:
        """Wire the services; `supervisor` runs background work in the app's task group."""
        spawn = supervisor.spawn
        settings = runtime.settings
        limiter: KeyLimiter
        if runtime.store.dialect == "postgresql":  # replicas may share the database: so do the keys' buckets
            limiter = SharedRateLimiter(
                runtime.store.rate_buckets,
                per_minute=config.rate_limit_per_minute,
                burst=config.rate_limit_burst,
            )
        else:
            limiter = RateLimiter(per_minute=config.rate_limit_per_minute, burst=config.rate_limit_burst)
        tickets: WsTickets  # replicas may share the database: a ticket from one opens a socket on any
        if runtime.store.dialect == "postgresql":
            tickets = SharedTickets(runtime.store.ws_tickets, config.ws_ticket_ttl)
        else:
            tickets = Tickets(config.ws_ticket_ttl)
        catalog = Catalog(runtime.assistants, runtime.store, config.api_assistant_policy())
        turn_metrics = TurnMetrics(metrics, spawn)
        sandboxes = SandboxService(
            runtime.manager,
            runtime.store,
            exec_timeout=config.exec_timeout,
            output_bytes=config.exec_output_bytes,
        )
        metrics.watch_sandboxes(runtime.manager)
        caps = OwnerCaps(
            {
                "websocket": config.max_websockets_per_owner,
                "event stream": config.max_event_streams_per_owner,
                "running turn": config.max_turns_per_owner,
            }
        )
        sessions = SessionService(runtime.store, runtime.turns, catalog, runtime.manager, turn_metrics, caps)
        return cls(
            runtime=runtime,
            config=config,
            metrics=metrics,
            limiter=limiter,
            auth=Authenticator(runtime.store, settings, limiter),
            catalog=catalog,
            turn_metrics=turn_metrics,
            sessions=sessions,
            sandboxes=sandboxes,
            images=ImageService(runtime.images, sandboxes, runtime.store, metrics, spawn),
            memories=Memories(runtime.store, sessions),
            supervisor=supervisor,
            caps=caps,
            tickets=tickets,
        )
