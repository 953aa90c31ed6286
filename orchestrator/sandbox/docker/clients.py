"""Clients of the Docker engine that `settings` names (`CAGE_DOCKER_HOST`, else `DOCKER_HOST` and
the rest of Docker's own environment).

The first client of a process asks the engine for its API version (`GET /version`, 5–7 ms with
the client's set-up); the others reuse the answer for the same engine instead of asking again.
"""

from __future__ import annotations

import threading
from typing import Any

import docker

from orchestrator.settings import Settings

_versions: dict[str, str] = {}
"""The API version each engine (by base URL) answered in this process."""
_lock = threading.Lock()


def _connection(settings: Settings) -> dict[str, Any]:
    if settings.docker_host:
        return {"base_url": settings.docker_host}
    return dict(docker.utils.kwargs_from_env())


def api_client(settings: Settings) -> docker.APIClient:
    """A low-level client of the engine."""
    kwargs = _connection(settings)
    key = str(kwargs.get("base_url"))
    with _lock:
        version = _versions.get(key, "auto")
    client = docker.APIClient(**kwargs, version=version)
    with _lock:
        _versions[key] = client.api_version
    return client


def docker_client(settings: Settings) -> docker.DockerClient:
    """A high-level client of the engine (images, containers as objects)."""
    kwargs = _connection(settings)
    key = str(kwargs.get("base_url"))
    with _lock:
        version = _versions.get(key, "auto")
    client = docker.DockerClient(**kwargs, version=version)
    with _lock:
        _versions[key] = client.api.api_version
    return client
