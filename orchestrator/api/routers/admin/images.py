"""Admin: runner images (list, build with progress as SSE, prune) and runners' availability."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from orchestrator.api.dependencies import AdminDep, ImagesDep
from orchestrator.api.event_stream import sse_response
from orchestrator.api.images import BuildRequest, PruneResult, RunnerView
from orchestrator.sandbox.images import BuildProgress, ImageInfo

router = APIRouter(prefix="/v1/admin", tags=["admin"])


async def _progress(items: AsyncIterator[BuildProgress]) -> AsyncIterator[str]:
    async for item in items:
        yield f"event: {item.phase}\ndata: {item.model_dump_json()}\n\n"


@router.get("/images", response_model=list[ImageInfo])
async def list_images(principal: AdminDep, images: ImagesDep) -> list[ImageInfo]:
    return await images.images()


@router.post("/images/build", response_class=StreamingResponse)
async def build_image(body: BuildRequest, principal: AdminDep, images: ImagesDep) -> StreamingResponse:
    """Build a runner image; progress streams as SSE (`event: <phase>`), ending with `done` or `error`."""
    return sse_response(_progress(await images.build(body, principal)))


@router.post("/images/prune", response_model=PruneResult)
async def prune_images(principal: AdminDep, images: ImagesDep) -> PruneResult:
    return await images.prune(principal)


@router.get("/runners", response_model=list[RunnerView])
async def list_runners(principal: AdminDep, images: ImagesDep) -> list[RunnerView]:
    return await images.runners()
