"""The default runtime of `cage serve`: the Docker engine, the settings' database, `PipelineService`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from orchestrator.api.config import ApiConfig
from orchestrator.api.runtime import RuntimeFactory, production_runtime
from orchestrator.assistants import AssistantRegistry
from orchestrator.pipeline import PipelineService, TurnService
from orchestrator.services import Services
from orchestrator.settings import Settings
from orchestrator.store import Store


@asynccontextmanager
async def pipeline_service(
    settings: Settings, store: Store, services: Services, assistants: AssistantRegistry
) -> AsyncIterator[TurnService]:
    service = PipelineService.from_services(
        services, store, close_grace=ApiConfig().shutdown_grace, assistants=assistants
    )
    try:
        yield service
    finally:
        await service.aclose()  # idempotent: the lifespan closed it already on a graceful stop


def default_runtime() -> RuntimeFactory:
    return production_runtime(pipeline_service)
