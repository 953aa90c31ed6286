"""`ImageService`: runner images and runners over the API (`/v1/admin/images`, `/v1/admin/runners`):
list, build with streamed progress, prune, availability."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.api.auth import Principal
from orchestrator.api.metrics import Metrics
from orchestrator.api.sandboxes import SandboxService
from orchestrator.errors import CageError
from orchestrator.redaction import redact
from orchestrator.sandbox.images import RUNNER_IMAGES, BuildProgress, ImageBuilder, ImageInfo, runner_image
from orchestrator.spawn import Spawn
from orchestrator.store import Store

log = structlog.get_logger(__name__)
_FROZEN = ConfigDict(frozen=True, extra="forbid")
_PROGRESS_BUFFER = 256


class BuildRequest(BaseModel):
    model_config = _FROZEN
    runner: str = Field(min_length=1, max_length=64)
    """A runner (`claude`, `codex`, `opencode`, `yaocode`, `tai`) or image name (`tools`)."""
    force: bool = False
    """Rebuild without the layer cache."""


class RunnerView(BaseModel):
    model_config = _FROZEN
    name: str
    image: str
    """Folder under `images/` the runner image builds from."""
    cli_version: str
    available: bool
    """An image for this runner at this CLI version is present in the engine."""
    images: list[str]
    """Tags of the runner's images present in the engine."""


class PruneResult(BaseModel):
    model_config = _FROZEN
    removed: list[str]
    kept_in_use: list[str]


class ImageService:
    """Lists, builds and prunes the runner images; a build runs in the background (`spawn`)."""

    def __init__(
        self, images: ImageBuilder, sandboxes: SandboxService, store: Store, metrics: Metrics, spawn: Spawn
    ) -> None:
        self._images = images
        self._sandboxes = sandboxes
        self._store = store
        self._metrics = metrics
        self._spawn = spawn

    async def images(self) -> list[ImageInfo]:
        return await self._images.list_images()

    async def runners(self) -> list[RunnerView]:
        present = await self._images.list_images()
        return [
            RunnerView(
                name=r.runner,
                image=r.name,
                cli_version=r.cli_version,
                available=any(
                    i.runner == r.runner and i.cli_version in (None, r.cli_version) for i in present
                ),
                images=sorted(i.tag for i in present if i.runner == r.runner),
            )
            for r in sorted(RUNNER_IMAGES.values(), key=lambda r: r.runner)
        ]

    async def build(self, request: BuildRequest, actor: Principal) -> AsyncIterator[BuildProgress]:
        """Start a build in the background and stream its progress. The build goes on when the
        client leaves; the last item has phase `done` or `error`.

        Raises:
            UsageError: unknown runner (before anything starts).
        """
        image = runner_image(request.runner)
        await self._store.audit.record(actor.key_id, "image.build", image.runner, {"force": request.force})
        send, receive = anyio.create_memory_object_stream[BuildProgress](_PROGRESS_BUFFER)

        async def report(progress: BuildProgress) -> None:
            # a slow or departed client loses progress lines, never the build
            with contextlib.suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                send.send_nowait(progress)

        async def run() -> None:
            with send:
                try:
                    ref = await self._images.build(image.runner, force=request.force, on_progress=report)
                except Exception as exc:  # a failed build ends the build, not the server
                    if not isinstance(exc, CageError):
                        log.error("image build failed", runner=image.runner, exc_info=exc)
                    message = (
                        redact(str(exc)) if isinstance(exc, CageError) else "internal error (see the log)"
                    )
                    self._metrics.image_builds.labels(image.runner, "error").inc()
                    await report(BuildProgress(tag=f"cage/{image.name}", phase="error", message=message))
                    return
                self._metrics.image_builds.labels(image.runner, "ok").inc()
                await report(BuildProgress(tag=ref.tag, phase="done", message=ref.image_hash))

        self._spawn(run)
        return _drain(receive)

    async def prune(self, actor: Principal) -> PruneResult:
        keep = await self._sandboxes.images_in_use()
        removed = await self._images.prune(keep)
        await self._store.audit.record(actor.key_id, "image.prune", "*", {"removed": len(removed)})
        return PruneResult(removed=removed, kept_in_use=sorted(keep))


async def _drain(receive: MemoryObjectReceiveStream[BuildProgress]) -> AsyncIterator[BuildProgress]:
    with receive:
        async for item in receive:
            yield item
