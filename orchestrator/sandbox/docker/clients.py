"""Clients of the Docker engine that `settings` names (`CAGE_DOCKER_HOST`, else `DOCKER_HOST` and
the rest of Docker's own environment).

The first client of a process asks the engine for its API version (`GET /version`, 5–7 ms with
the client's set-up); the others reuse the answer for the same engine instead of asking again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import docker

from orchestrator.settings import Settings

_versions: dict[str, str] = {}
"""The API version each engine (by base URL) answered in this process."""
_lock = threading.Lock()
_C = TypeVar("_C", docker.APIClient, docker.DockerClient)


def _connected(settings: Settings, make: Callable[..., _C], api: Callable[[_C], docker.APIClient]) -> _C:
    kwargs: dict[str, Any] = (
        {"base_url": settings.docker_host} if settings.docker_host else dict(docker.utils.kwargs_from_env())
    )
    key = str(kwargs.get("base_url"))
    with _lock:
        version = _versions.get(key, "auto")
    client = make(**kwargs, version=version)
    with _lock:
        _versions[key] = api(client).api_version
    return client


def api_client(settings: Settings) -> docker.APIClient:
    """A low-level client of the engine."""
    return _connected(settings, docker.APIClient, lambda client: client)


def docker_client(settings: Settings) -> docker.DockerClient:
    """A high-level client of the engine (images, containers as objects)."""
    return _connected(settings, docker.DockerClient, lambda client: client.api)
