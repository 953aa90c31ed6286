"""Admin: assistants. File and system assistants are read-only (409 / 403); API-created ones are
stored in the database."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header
from pydantic import BaseModel, ConfigDict

from orchestrator.api.catalog import AssistantBody, AssistantDetail, AssistantSummary, NewAssistant
from orchestrator.api.dependencies import AdminDep, CatalogDep
from orchestrator.dsl.locales import request_locale

router = APIRouter(prefix="/v1/admin/assistants", tags=["admin"])
AcceptLanguage = Annotated[str | None, Header()]
"""Names and descriptions come in `?locale=`, else this header's locale, else the default one."""


class Reloaded(BaseModel):
    model_config = ConfigDict(frozen=True)
    assistants: list[str]


@router.get("", response_model=list[AssistantSummary])
async def list_assistants(
    principal: AdminDep,
    catalog: CatalogDep,
    locale: str | None = None,
    accept_language: AcceptLanguage = None,
) -> list[AssistantSummary]:
    return await catalog.summaries(request_locale(locale, accept_language))


@router.post("", response_model=AssistantDetail, status_code=201)
async def create_assistant(body: NewAssistant, principal: AdminDep, catalog: CatalogDep) -> AssistantDetail:
    return await catalog.create(body, principal)


@router.post("/reload", response_model=Reloaded)
async def reload_assistants(
    principal: AdminDep, catalog: CatalogDep, assistant_id: str | None = None
) -> Reloaded:
    """Re-read assistant files (one assistant, or everything with `agent.yml` and connectors)."""
    return Reloaded(assistants=await catalog.reload(assistant_id, principal))


@router.get("/{assistant_id}", response_model=AssistantDetail)
async def get_assistant(
    assistant_id: str,
    principal: AdminDep,
    catalog: CatalogDep,
    locale: str | None = None,
    accept_language: AcceptLanguage = None,
) -> AssistantDetail:
    return await catalog.get(assistant_id, request_locale(locale, accept_language))


@router.put("/{assistant_id}", response_model=AssistantDetail)
async def update_assistant(
    assistant_id: str, body: AssistantBody, principal: AdminDep, catalog: CatalogDep
) -> AssistantDetail:
    return await catalog.update(assistant_id, body, principal)


@router.delete("/{assistant_id}", status_code=204)
async def delete_assistant(assistant_id: str, principal: AdminDep, catalog: CatalogDep) -> None:
    await catalog.delete(assistant_id, principal)
