"""Server-only settings (`CAGE_*` environment variables) that the rest of Cage does not need."""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from orchestrator.api.policy import ApiAssistantPolicy
from orchestrator.attribute_docs import describe_fields


class ApiConfig(BaseSettings):
    """Limits and timings of the HTTP/websocket server."""

    model_config = SettingsConfigDict(env_prefix="CAGE_", extra="ignore", json_schema_extra=describe_fields)

    rate_limit_per_minute: float = 600.0
    """Requests one API key may make per minute, sustained (a token bucket refilled continuously)."""
    rate_limit_burst: int = 120
    """Requests one API key may make at once before the per-minute rate applies."""
    failed_auth_per_minute: float = 60.0
    """Unauthenticated or failed requests one client address may make per minute (then 429)."""
    failed_auth_burst: int = 30
    """Unauthenticated or failed requests one client address may make at once."""
    max_body_bytes: int = 1 * 2**20
    """Largest request body on most routes (413 past it, before the body is read)."""
    max_attachment_body_bytes: int = 16 * 2**20
    """Largest request body on the routes that carry attachments (`/v1/assistants/{id}/stream`,
    `/v1/chat/completions`)."""
    max_websockets_per_owner: int = 32
    """Session websockets one owner may hold open at once (429 past it)."""
    max_event_streams_per_owner: int = 32
    """SSE follows (`GET /v1/sessions/{id}/stream`) one owner may hold open at once."""
    max_turns_per_owner: int = 16
    """Turns one owner may have running at once, over all its sessions."""
    max_sessions_per_owner: int = Field(
        default=10_000,
        ge=1,
        validation_alias=AliasChoices(
            "max_sessions_per_owner", "CAGE_MAX_SESSIONS_PER_OWNER", "CAGE_MAX_CHATS_PER_OWNER"
        ),
    )
    """Sessions (sub-agent child sessions included) one owner may have, over every replica; a new
    one past it is refused with 429 until some are deleted or expire (`session_ttl_seconds`).
    `CAGE_MAX_CHATS_PER_OWNER`, its name before 2026-12, is still read."""
    resume_per_minute: float = 30.0
    """`resume` frames (each replays the log) one websocket may send per minute."""
    revocation_check_interval: float = 5.0
    """Seconds between checks that an open websocket's or event stream's key is still valid."""
    ws_ticket_ttl: float = 30.0
    """Seconds a websocket ticket (`POST /v1/sessions/ws-ticket`) stays valid; it is good once."""
    allowed_origins: list[str] = []
    """Browser origins (`https://app.example`) allowed on websockets and, through CORS, on HTTP
    routes; empty: no browser origin (a websocket with an `Origin` header is refused)."""
    trusted_hosts: list[str] = ["*"]
    """`Host` headers the server answers (`*`: any); with authentication off, only loopback names."""
    sse_keepalive_seconds: float = 15.0
    """Seconds of silence after which an SSE stream sends a comment, so proxies keep it open."""
    session_ttl_seconds: float | None = None
    """Delete sessions idle this long (with their events and messages); none: keep them, unless
    `agent.yml` `store.ttl` says otherwise."""
    event_ttl_seconds: float | None = None
    """Delete events older than this; none: keep them."""
    audit_ttl_seconds: float | None = None
    """Delete audit entries older than this; none: keep them."""
    retention_interval: float = 3600.0
    """Seconds between two retention sweeps."""
    api_assistant_max_memory_bytes: int = 8 * 2**30
    """Most memory an API-created assistant's sandbox may ask for."""
    api_assistant_max_cpus: float = 4.0
    """Most CPUs an API-created assistant's sandbox may ask for."""
    api_assistant_max_pids: int = 4096
    """Most pids an API-created assistant's sandbox may ask for."""
    api_assistant_runtimes: list[str] = []
    """Engine runtimes (`runsc`) API-created assistants may name; empty: the engine's default only."""
    api_assistant_images: list[str] = []
    """Base images API-created assistants may name; empty: the runner's default image only."""
    api_assistant_networks: list[str] = ["none", "bridge", "allowlist"]
    """Egress kinds API-created assistants may ask for."""
    ws_ping_interval: float = 20.0
    """Seconds between websocket protocol pings; a client that misses a pong is dropped."""
    ws_max_message_bytes: int = 16 * 2**20
    """Largest websocket frame a client may send (attachments travel base64-encoded)."""
    ws_compression: bool = False
    """permessage-deflate on websockets, when a client offers it. Off by default: each compressed
    connection keeps two zlib streams (about a third of an idle session's memory) and pays a
    deflate per event; events are small JSON, and on a LAN or loopback the bytes cost less."""
    readiness_timeout: float = 2.0
    """Seconds `/readyz` waits for the database and for the engine before answering 503."""
    shutdown_grace: float = 10.0
    """Seconds running turns get to end with `stream_end` on shutdown."""
    exec_timeout: float = 60.0
    """Default time limit of an admin `exec` in a sandbox."""
    exec_output_bytes: int = 1 * 2**20
    """Most stdout bytes an admin `exec` returns (the rest is cut, and the response says so)."""

    def api_assistant_policy(self) -> ApiAssistantPolicy:
        return ApiAssistantPolicy(
            max_memory_bytes=self.api_assistant_max_memory_bytes,
            max_cpus=self.api_assistant_max_cpus,
            max_pids=self.api_assistant_max_pids,
            allowed_runtimes=tuple(self.api_assistant_runtimes),
            allowed_images=tuple(self.api_assistant_images),
            allowed_networks=tuple(self.api_assistant_networks),
        )
