"""The HTTP connection pools model clients share across turns.

A model client built per turn used to bring its own pool, so every LLM-mode turn (and every title
job) opened a new TCP connection to the model, and a TLS handshake with a hosted one, then closed
it. `ModelConnections` keeps one pool per SDK for as long as its owner runs (the turn pipeline,
which closes it after its turns); the clients built on it leave it open when they close.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    import httpx2

log = structlog.get_logger(__name__)


class ModelConnections:
    """One HTTP client (a connection pool) per SDK, made on first use, closed by `aclose`. Used from
    one event loop (its owner's)."""

    def __init__(self) -> None:
        self._pools: dict[str, httpx2.AsyncClient] = {}
        self._closed = False

    def pool(self, sdk: str, make: Callable[[], httpx2.AsyncClient]) -> httpx2.AsyncClient | None:
        """The shared client of `sdk` (made by `make` the first time); None once closed, when the
        caller makes a client of its own."""
        if self._closed:
            return None
        found = self._pools.get(sdk)
        if found is None:
            found = self._pools[sdk] = make()
        return found

    async def aclose(self) -> None:
        """Close every pool; idempotent. Clients built on them afterwards get their own."""
        self._closed = True
        pools, self._pools = list(self._pools.values()), {}
        for client in pools:
            try:
                await client.aclose()
            except Exception as exc:  # noqa: BLE001 - closing a pool must not stop closing the rest
                log.warning("model_connections.close_failed", error=str(exc))


def http_client(
    connections: ModelConnections | None, sdk: str, make: Callable[[], httpx2.AsyncClient]
) -> tuple[httpx2.AsyncClient, bool]:
    """The HTTP client a model client of `sdk` runs on, and whether it is the model client's own
    (to close with it): the shared pool of `connections` while there is one, else a new one."""
    shared = connections.pool(sdk, make) if connections is not None else None
    return (make(), True) if shared is None else (shared, False)
