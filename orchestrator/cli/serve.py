"""`cage serve`: run the HTTP/websocket server (uvicorn) on `create_app(settings)`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import structlog
import typer
import uvicorn
from sqlalchemy.engine import make_url

from orchestrator.api import ApiConfig, create_app
from orchestrator.api.server import CageServer
from orchestrator.cli.firstrun import first_contact
from orchestrator.logs import configure_logging
from orchestrator.settings import Settings
from orchestrator.store.database import sqlite_path
from orchestrator.store.server_lock import ServerLock


def serve(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option("--host", help="Address to bind (default CAGE_HOST).")] = None,
    port: Annotated[int | None, typer.Option("--port", help="Port to bind (default CAGE_PORT).")] = None,
    app_dir: Annotated[Path | None, typer.Option("--app", help="Application directory.")] = None,
) -> None:
    """Serve sessions (websocket), OpenAI-compatible chat, native SSE and the admin API."""
    overrides: dict[str, Any] = {"app_dir": (app_dir or ctx.obj["app_dir"]).resolve()}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    settings = Settings(**overrides)  # the environment fills in the rest
    config = ApiConfig()
    configure_logging(settings.log_level)
    first_contact(settings)
    if settings.backend == "kubernetes":  # credentials and RBAC now; /readyz keeps saying the same
        from orchestrator.sandbox.kubernetes.backend import startup_check

        problem = startup_check(settings)
        if problem:
            structlog.get_logger("cage.serve").error("kubernetes backend not ready", reason=problem)
    lock = _single_server(settings)
    app = create_app(settings, config=config)
    uvicorn_config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,  # the app logs every request itself, without query strings
        ws_ping_interval=config.ws_ping_interval,
        ws_ping_timeout=config.ws_ping_interval,
        ws_max_size=config.ws_max_message_bytes,
        ws_per_message_deflate=config.ws_compression,
        timeout_graceful_shutdown=5,  # the turns have ended by then (CageServer drains first)
        lifespan="on",
    )
    try:
        CageServer(uvicorn_config, app).run()
    finally:
        if lock is not None:
            lock.release()


def _single_server(settings: Settings) -> ServerLock | None:
    """On SQLite, this server's exclusive lock on the database file (a second one is refused with
    the holder's name); None on Postgres, where any number of replicas share the database.

    Raises:
        UsageError: another `cage serve` holds the SQLite database.
    """
    database = sqlite_path(make_url(settings.resolved_database_url()))
    if database is None:
        return None
    lock = ServerLock(database)
    lock.acquire()
    return lock
