"""The long-lived services one Cage process needs, built from `Settings` and closed together:

```python
async with open_services(settings) as services:   # the server's runtime, `cage run`
    ...
```
closes the engine clients (the sandbox backend's and the image builder's) on the way out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

from orchestrator.dsl import AppLoader
from orchestrator.gateway import ModelGateway
from orchestrator.sandbox.backend import SandboxBackend
from orchestrator.sandbox.images import ImageBuilder
from orchestrator.sandbox.manager import SandboxManager
from orchestrator.settings import Settings


@dataclass
class Services:
    settings: Settings
    loader: AppLoader
    backend: SandboxBackend
    images: ImageBuilder
    manager: SandboxManager
    gateway: ModelGateway
    """The model gateway runners reach instead of the providers (started by the first turn)."""

    @classmethod
    def from_settings(cls, settings: Settings) -> Services:
        """Wire the Docker backend, the image builder and the manager for `settings.app_dir`."""
        from orchestrator.sandbox.docker import DockerBackend
        from orchestrator.sandbox.docker.builder import DockerImageBuilder

        backend: SandboxBackend
        images: ImageBuilder
        if settings.backend == "kubernetes":  # images pushed by `cage images push`, looked up there
            from orchestrator.sandbox.kubernetes.backend import KubernetesBackend
            from orchestrator.sandbox.kubernetes.registry_images import RegistryImageResolver

            backend = KubernetesBackend.from_settings(settings)
            images = RegistryImageResolver(settings)
        else:
            backend = DockerBackend.from_settings(settings)
            images = DockerImageBuilder(settings)
        return cls(
            settings=settings,
            loader=AppLoader(settings.app_dir, cache_size=settings.assistant_cache_size),
            backend=backend,
            images=images,
            manager=SandboxManager(backend, images, settings, extra_labels=settings.sandbox_labels),
            gateway=ModelGateway.from_settings(settings),
        )

    async def aclose(self) -> None:
        """Close what `from_settings` opened: the image builder's and the backend's clients."""
        with anyio.CancelScope(shield=True):
            await self.images.aclose()
            await self.backend.aclose()


@asynccontextmanager
async def open_services(settings: Settings) -> AsyncIterator[Services]:
    """`Services.from_settings(settings)`, closed when the block ends (however it ends)."""
    services = Services.from_settings(settings)
    try:
        yield services
    finally:
        await services.aclose()
