"""The long-lived parts one server needs, built per app by a `RuntimeFactory` in the lifespan.

`create_app(settings)` uses `production_runtime` (the process's services over the Docker engine,
the settings' database, one `AssistantRegistry` and the turn pipeline, all closed with it); tests
pass a factory that swaps in fakes implementing the same protocols.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

import anyio

from orchestrator.api.config import ApiConfig
from orchestrator.assistants import AssistantRegistry
from orchestrator.dsl import AppLoader
from orchestrator.pipeline import PipelineService, TurnService, turn_tasks
from orchestrator.sandbox import SandboxManager
from orchestrator.sandbox.images import ImageBuilder
from orchestrator.services import open_services
from orchestrator.settings import Settings
from orchestrator.store import Store


@dataclass(frozen=True)
class Runtime:
    """Persistence, assistants, sandboxes, images and turns: what the routers' services wrap."""

    settings: Settings
    store: Store
    loader: AppLoader
    assistants: AssistantRegistry
    """The one registry of assistants: the catalog's and the turn pipeline's."""
    manager: SandboxManager
    images: ImageBuilder
    turns: TurnService


RuntimeFactory = Callable[[Settings], AbstractAsyncContextManager[Runtime]]


@asynccontextmanager
async def production_runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """The server's runtime: services, store, registry and pipeline, closed in reverse order."""
    async with open_services(settings) as services, Store.from_settings(settings) as store:
        assistants = AssistantRegistry(services.loader, store, env_prefix=settings.api_assistant_env_prefix)
        async with turn_tasks() as tasks:  # the turns run in the server's group, open with the runtime
            turns = PipelineService.from_services(
                services, store, tasks=tasks, close_grace=ApiConfig().shutdown_grace, assistants=assistants
            )
            try:
                yield Runtime(
                    settings=settings,
                    store=store,
                    loader=services.loader,
                    assistants=assistants,
                    manager=services.manager,
                    images=services.images,
                    turns=turns,
                )
            finally:
                with anyio.CancelScope(shield=True):
                    await turns.aclose()  # idempotent: the lifespan closed it already on a graceful stop
