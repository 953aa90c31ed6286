"""The long-lived parts one server needs, built per app by a `RuntimeFactory` in the lifespan.

`create_app(settings)` uses `production_runtime` (Docker engine, the settings' database, the
turn pipeline); tests pass a factory that swaps in fakes implementing the same protocols.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

from orchestrator.assistants import AssistantRegistry
from orchestrator.dsl import AppLoader
from orchestrator.pipeline import TurnService
from orchestrator.sandbox import SandboxManager
from orchestrator.sandbox.images import ImageBuilder
from orchestrator.services import Services, open_services
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
TurnServiceFactory = Callable[
    [Settings, Store, Services, AssistantRegistry], AbstractAsyncContextManager[TurnService]
]


def production_runtime(turn_service: TurnServiceFactory) -> RuntimeFactory:
    """A factory wiring the Docker backend and the settings' database to `turn_service`."""

    @asynccontextmanager
    async def build(settings: Settings) -> AsyncIterator[Runtime]:
        async with open_services(settings) as services, Store.from_settings(settings) as store:
            assistants = AssistantRegistry(
                services.loader, store, env_prefix=settings.api_assistant_env_prefix
            )
            async with turn_service(settings, store, services, assistants) as turns:
                yield Runtime(
                    settings=settings,
                    store=store,
                    loader=services.loader,
                    assistants=assistants,
                    manager=services.manager,
                    images=services.images,
                    turns=turns,
                )

    return build
