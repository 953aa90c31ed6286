"""`engine_clients(settings)`: the sandbox backend and the image builder of the configured engine.

Docker by default; Kubernetes (`CAGE_BACKEND=kubernetes`) with the images `cage images push`
pushed, looked up in the registry. The engine's modules (and the `docker` package) are imported
only for the engine asked for. Whoever calls it closes both (`aclose()`): `open_services` does.
"""

from __future__ import annotations

from orchestrator.sandbox.backend import SandboxBackend
from orchestrator.sandbox.images import ImageBuilder
from orchestrator.settings import Settings


def engine_clients(settings: Settings) -> tuple[SandboxBackend, ImageBuilder]:
    """The backend and image builder of `settings.backend`; nothing connects until first used."""
    if settings.backend == "kubernetes":
        from orchestrator.sandbox.kubernetes.backend import KubernetesBackend
        from orchestrator.sandbox.kubernetes.registry_images import RegistryImageResolver

        return KubernetesBackend.from_settings(settings), RegistryImageResolver(settings)
    from orchestrator.sandbox.docker import DockerBackend
    from orchestrator.sandbox.docker.builder import DockerImageBuilder

    return DockerBackend.from_settings(settings), DockerImageBuilder(settings)
