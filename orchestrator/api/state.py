"""`ApiState`: the process's `Services` plus the API's own (authentication, limits, the session,
sandbox and image services the routers call), built once in the lifespan and read by the routers'
dependencies from `app.state.api`. It opens nothing: what needs closing is `Services`', closed by
`open_services`."""

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
from orchestrator.api.sandboxes import SandboxService
from orchestrator.api.sessions import SessionService
from orchestrator.api.supervisor import Supervisor
from orchestrator.api.tickets import SharedTickets, Tickets, WsTickets
from orchestrator.api.turn_metrics import TurnMetrics
from orchestrator.pipeline import PipelineService
from orchestrator.services import Services


@dataclass(frozen=True)
class ApiState:
    services: Services
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
    def build(
        cls, services: Services, config: ApiConfig, metrics: Metrics, supervisor: Supervisor
    ) -> ApiState:
        """Wire the services; `supervisor` runs background work in the app's task group."""
        spawn = supervisor.spawn
        settings = services.settings
        limiter: KeyLimiter
        if services.store.dialect == "postgresql":  # replicas may share the database: so do the keys' buckets
            limiter = SharedRateLimiter(
                services.store.rate_buckets,
                per_minute=config.rate_limit_per_minute,
                burst=config.rate_limit_burst,
            )
        else:
            limiter = RateLimiter(per_minute=config.rate_limit_per_minute, burst=config.rate_limit_burst)
        tickets: WsTickets  # replicas may share the database: a ticket from one opens a socket on any
        if services.store.dialect == "postgresql":
            tickets = SharedTickets(services.store.ws_tickets, config.ws_ticket_ttl)
        else:
            tickets = Tickets(config.ws_ticket_ttl)
        catalog = Catalog(services.assistants, services.store, config.api_assistant_policy())
        turn_metrics = TurnMetrics(metrics, spawn)
        sandboxes = SandboxService(
            services.manager,
            services.store,
            exec_timeout=config.exec_timeout,
            output_bytes=config.exec_output_bytes,
        )
        metrics.watch_sandboxes(services.manager)
        if isinstance(services.turns, PipelineService):
            metrics.watch_gate(services.turns.gate)
        caps = OwnerCaps(
            {
                "websocket": config.max_websockets_per_owner,
                "event stream": config.max_event_streams_per_owner,
                "running turn": config.max_turns_per_owner,
            }
        )
        sessions = SessionService(
            services.store, services.turns, catalog, services.manager, turn_metrics, caps
        )
        return cls(
            services=services,
            config=config,
            metrics=metrics,
            limiter=limiter,
            auth=Authenticator(services.store, settings, limiter),
            catalog=catalog,
            turn_metrics=turn_metrics,
            sessions=sessions,
            sandboxes=sandboxes,
            images=ImageService(services.images, sandboxes, services.store, metrics, spawn),
            memories=Memories(services.store, sessions),
            supervisor=supervisor,
            caps=caps,
            tickets=tickets,
        )
