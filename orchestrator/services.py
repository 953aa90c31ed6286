"""`Services`: everything one Cage process runs on, opened by `open_services(settings)` and closed
by it, whichever way the block ends:

```python
async with open_services(settings) as services:    # the server's lifespan, `cage run`
    await services.store.migrate()
    handle = await services.turns.start(TurnInput(...))
```
It opens the engine's clients (the sandbox backend's and the image builder's), the store, the
assistant registry, the model gateway and the turn pipeline, whose turns run in a task group held
open as long as the block; on the way out the pipeline ends its turns, then the store and the
engine clients close. The server builds its own services on it (`orchestrator.api.state.ApiState`);
tests hand the server a `ServicesFactory` that opens the same `Services` over fakes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

import anyio

from orchestrator.assistants import AssistantRegistry
from orchestrator.dsl import AppLoader
from orchestrator.gateway import ModelGateway
from orchestrator.pipeline import PipelineService, TurnService, turn_tasks
from orchestrator.pipeline.load_gate import LoadGate
from orchestrator.pipeline.permissions import Unattended
from orchestrator.pipeline.service import CLOSE_GRACE
from orchestrator.sandbox.backend import SandboxBackend
from orchestrator.sandbox.engines import engine_clients
from orchestrator.sandbox.images import ImageBuilder
from orchestrator.sandbox.manager import SandboxManager
from orchestrator.settings import Settings
from orchestrator.store import Store


@dataclass(frozen=True)
class Services:
    """The long-lived parts of one process; `open_services` builds and closes them."""

    settings: Settings
    loader: AppLoader
    backend: SandboxBackend
    images: ImageBuilder
    manager: SandboxManager
    gateway: ModelGateway
    """The model gateway runners reach instead of the providers (started by the first turn)."""
    store: Store
    """Not migrated yet: its opener does that (the server's lifespan, `cage run`)."""
    assistants: AssistantRegistry
    """The one registry of assistants: the API's catalog's and the pipeline's."""
    turns: TurnService
    """The turn pipeline (`PipelineService`)."""


ServicesFactory = Callable[[Settings], AbstractAsyncContextManager[Services]]
"""Opens a process's services for its settings: `open_services`, or a test's fakes."""


@asynccontextmanager
async def open_services(
    settings: Settings,
    *,
    engine: tuple[SandboxBackend, ImageBuilder] | None = None,
    close_grace: float = CLOSE_GRACE,
    unattended: Unattended | None = None,
    titles: bool = True,
) -> AsyncIterator[Services]:
    """The process's services for `settings`, closed in reverse order when the block ends.

    `engine`: the backend and image builder to use (default: `engine_clients(settings)`); closed
    with the rest either way. `close_grace`, `unattended`, `titles`: the pipeline's
    (`PipelineService`): how long running turns get to stop on close, who answers permission
    requests with no client there (`cage run`), whether sessions get titles.
    """
    backend, images = engine if engine is not None else engine_clients(settings)
    try:
        async with Store.from_settings(settings) as store, turn_tasks() as tasks:
            loader = AppLoader(settings.app_dir, cache_size=settings.assistant_cache_size)
            assistants = AssistantRegistry(loader, store, env_prefix=settings.api_assistant_env_prefix)
            manager = SandboxManager(backend, images, settings, extra_labels=settings.sandbox_labels)
            gateway = ModelGateway.from_settings(settings)
            turns = PipelineService(
                tasks=tasks,
                loader=loader,
                manager=manager,
                store=store,
                assistants=assistants,
                gateway=gateway,
                allow_host_mcp=settings.allow_host_mcp,
                close_grace=close_grace,
                unattended=unattended,
                titles=titles,
                gate=LoadGate(
                    floor=settings.turn_gate_floor,
                    delay_target=settings.turn_gate_delay,
                    max_wait=settings.turn_gate_wait,
                ),
            )
            try:
                yield Services(
                    settings=settings,
                    loader=loader,
                    backend=backend,
                    images=images,
                    manager=manager,
                    gateway=gateway,
                    store=store,
                    assistants=assistants,
                    turns=turns,
                )
            finally:
                with anyio.CancelScope(shield=True):
                    await turns.aclose()  # idempotent: its owner may have closed it already
    finally:
        with anyio.CancelScope(shield=True):
            await images.aclose()
            await backend.aclose()
