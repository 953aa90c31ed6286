"""`ImageBuilder` on the Docker engine: build a runner image once per tag, stream its output.

* A tag is built only when missing. Within a process one `anyio.Lock` per tag serialises builds;
  across processes an `flock` on `<data_dir>/locks/image-<tag>.lock` does, so two `cage` processes
  never build the same tag twice. Both re-check for the tag once they hold the lock.
* The build context is assembled in memory (the image's folder under `images/`, the extra CA
  bundle, Cage's source for `tai`), so nothing is written into the source tree.
* Every SDK call runs in a worker thread (R12); engine errors become `orchestrator.errors` (R9).
"""

from __future__ import annotations

import fcntl
import io
import os
import tarfile
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import docker
import docker.errors
import structlog
from anyio import to_thread
from docker.models.images import Image

from orchestrator.errors import EngineUnavailable, ImageBuildError
from orchestrator.redaction import redact
from orchestrator.sandbox.docker.clients import docker_client
from orchestrator.sandbox.hashing import context_files
from orchestrator.sandbox.images import (
    CLI_VERSION_LABEL,
    EGRESS_IMAGE,
    IMAGE_HASH_LABEL,
    MANAGED_LABEL,
    OFFLINE_BASE_PREFIX,
    RUNNER_IMAGES,
    RUNNER_LABEL,
    BaseImage,
    BuildPlan,
    BuildProgress,
    ImageInfo,
    ImageRef,
    ProgressCallback,
    RunnerImage,
    build_runner_images,
    default_images_dir,
    extra_context_files,
    plan_build,
    ready_image,
    runner_image,
    tls_hint,
)
from orchestrator.settings import Settings

log = structlog.get_logger(__name__)

LOG_TAIL_LINES = 30
"""Build output lines kept for `ImageBuildError.log_tail`."""
_LOCK_POLL_SECONDS = 0.25
_END = object()


@contextmanager
def _engine_errors(image: str) -> Iterator[None]:
    """Translate docker SDK errors: API errors fail the build of `image`, transport errors the engine."""
    try:
        yield
    except docker.errors.APIError as exc:
        raise ImageBuildError(image, redact(str(exc.explanation or exc))) from exc
    except (docker.errors.DockerException, OSError) as exc:  # requests' errors are OSErrors
        raise EngineUnavailable(redact(str(exc))) from exc


@asynccontextmanager
async def _file_lock(path: Path) -> AsyncIterator[None]:
    """An exclusive `flock` on `path`, polled so that waiting never blocks the event loop."""

    def _open() -> int:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    fd = await to_thread.run_sync(_open)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await anyio.sleep(_LOCK_POLL_SECONDS)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _tar_context(files: Mapping[str, bytes]) -> io.BytesIO:
    """An uncompressed tar of `files` with fixed owner and mtime, ready to send as a build context."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, content in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(content))
    buf.seek(0)
    return buf


def _base_image(image: Image, ref: str) -> BaseImage:
    labels = (image.attrs.get("Config") or {}).get("Labels") or {}
    return BaseImage(ref=ref, id=str(image.id), labels=dict(labels))


class DockerImageBuilder:
    """Builds runner images with the Docker engine; implements `orchestrator.sandbox.images.ImageBuilder`."""

    def __init__(
        self,
        client_or_settings: docker.DockerClient | Settings,
        *,
        settings: Settings | None = None,
        images_dir: Path | None = None,
        source_root: Path | None = None,
    ) -> None:
        if isinstance(client_or_settings, Settings):
            self._settings = client_or_settings
            self._docker: docker.DockerClient | None = None
            self._owns_client = True
        else:
            self._settings = settings or Settings()
            self._docker = client_or_settings
            self._owns_client = False
            """A client passed in is its giver's to close."""
        self._images_dir = images_dir or default_images_dir()
        self._source_root = source_root
        self._locks: dict[str, anyio.Lock] = {}

    async def aclose(self) -> None:
        """Close the engine client this builder opened (a client passed in is left open)."""
        client = self._docker if self._owns_client else None
        if client is not None:
            self._docker = None
            await to_thread.run_sync(client.close)

    async def _client(self) -> docker.DockerClient:
        if self._docker is None:
            with _engine_errors("engine"):
                self._docker = await to_thread.run_sync(docker_client, self._settings)
        return self._docker

    # --- ImageBuilder ------------------------------------------------------------------------

    async def ensure(
        self, runner: str, *, base: str | None = None, on_progress: ProgressCallback | None = None
    ) -> ImageRef:
        """The image for `runner` on `base` (`computer.image`), built if its tag is missing.

        Raises:
            ImageBuildError: the base image is missing and cannot be pulled, or the build failed.
            EngineUnavailable: no engine answers.
        """
        image = runner_image(runner)
        base_image = await self._base(base or self._settings.base_image)
        ready = ready_image(image.runner, base_image)
        if ready is not None:
            await _report(on_progress, BuildProgress(tag=ready.tag, phase="cached", message="ready image"))
            return ready
        return await self._ensure(image, base_image, force=False, on_progress=on_progress)

    async def build(
        self, runner: str, *, force: bool = False, on_progress: ProgressCallback | None = None
    ) -> ImageRef:
        """Build `runner`'s image on the default base; `force` rebuilds it without the layer cache.

        Raises:
            ImageBuildError: the base image is missing or the build failed.
            EngineUnavailable: no engine answers.
        """
        image = runner_image(runner)
        base_image = await self._base(self._settings.base_image)
        return await self._ensure(image, base_image, force=force, on_progress=on_progress)

    async def ensure_image(
        self, image: RunnerImage, *, on_progress: ProgressCallback | None = None
    ) -> ImageRef:
        """A non-runner image of `images/` (the egress proxy) on the default base, built if missing."""
        base_image = await self._base(self._settings.base_image)
        return await self._ensure(image, base_image, force=False, on_progress=on_progress)

    async def list_images(self) -> list[ImageInfo]:
        """Every image this builder (or another Cage) built, one entry per `cage/*` tag."""
        client = await self._client()
        with _engine_errors("cage/*"):
            images = await to_thread.run_sync(
                lambda: client.images.list(filters={"label": f"{MANAGED_LABEL}=true"})
            )
        infos: list[ImageInfo] = []
        for img in images:
            labels = (img.attrs.get("Config") or {}).get("Labels") or {}
            runner = labels.get(RUNNER_LABEL)
            if not runner:
                continue
            for tag in img.tags:
                if not tag.startswith("cage/"):
                    continue
                infos.append(
                    ImageInfo(
                        tag=tag,
                        runner=runner,
                        image_hash=labels.get(IMAGE_HASH_LABEL) or tag.rsplit(":", 1)[-1],
                        id=str(img.id),
                        size=int(img.attrs.get("Size") or 0),
                        created=img.attrs["Created"],
                        cli_version=labels.get(CLI_VERSION_LABEL),
                    )
                )
        return sorted(infos, key=lambda i: (i.runner, i.created), reverse=False)

    async def prune(self, keep_in_use: set[str]) -> list[str]:
        """Remove Cage-built tags that are neither in `keep_in_use` nor current for the default base.

        An image still used by a container is skipped (the engine refuses), never forced.
        """
        current, unknown = await self._current_tags()
        keep = set(keep_in_use) | current
        client = await self._client()
        removed: list[str] = []
        for info in await self.list_images():
            if info.tag in keep or info.runner in unknown:
                continue
            try:
                with _engine_errors(info.tag):
                    await to_thread.run_sync(client.images.remove, info.tag)
            except ImageBuildError as exc:
                log.info("image.prune.skipped", tag=info.tag, reason=str(exc))
                continue
            removed.append(info.tag)
        log.info("image.prune", removed=removed)
        return removed

    # --- internals ---------------------------------------------------------------------------

    async def _current_tags(self) -> tuple[set[str], set[str]]:
        """Tags the current Dockerfiles produce on the default base, and the runners whose tag is unknown.

        A runner whose current tag cannot be computed (no source tree for `tai`) keeps all its images.
        """
        client = await self._client()
        ref = self._settings.base_image
        try:
            with _engine_errors(ref):
                found = await to_thread.run_sync(client.images.get, ref)
        except ImageBuildError:
            return set(), set(RUNNER_IMAGES)  # no default base to compare with: prune nothing
        base = _base_image(found, ref)
        tags: set[str] = set()
        unknown: set[str] = set()
        for image in RUNNER_IMAGES.values():
            try:
                plan, _ = await to_thread.run_sync(self._plan, image, base)
            except ImageBuildError:
                unknown.add(image.runner)
                continue
            tags.add(plan.tag)
        return tags, unknown

    async def _base(self, ref: str) -> BaseImage:
        """Inspect `ref`, pulling it when it is not in the engine yet."""
        client = await self._client()
        with _engine_errors(ref):
            try:
                found = await to_thread.run_sync(client.images.get, ref)
            except docker.errors.ImageNotFound:
                found = None
        if found is None and ref.startswith(OFFLINE_BASE_PREFIX):
            raise ImageBuildError(
                ref,
                "the offline base image is not built: run `make base-image` (images/base/build.sh), or set "
                "CAGE_BASE_IMAGE=debian:bookworm-slim to build on Debian pulled from Docker Hub",
            )
        if found is None:
            log.info("image.base.pull", ref=ref)
            try:
                with _engine_errors(ref):
                    found = await to_thread.run_sync(client.images.pull, ref)  # no tag means `latest`
            except ImageBuildError as exc:
                raise ImageBuildError(ref, f"base image not found and cannot be pulled: {exc}") from exc
        return _base_image(found, ref)

    def _plan(self, image: RunnerImage, base: BaseImage) -> tuple[BuildPlan, dict[str, bytes]]:
        """Blocking: read the context, hash it, return the plan and the full context files."""
        extra = extra_context_files(
            image,
            extra_ca_certs=self._settings.extra_ca_certs,
            source_root=self._source_root,
            images_dir=self._images_dir,
        )
        plan = plan_build(image, base, images_dir=self._images_dir, extra_files=extra)
        files = context_files(self._images_dir / image.name)
        files.update(extra)
        return plan, files

    async def _exists(self, tag: str) -> bool:
        client = await self._client()
        with _engine_errors(tag):
            try:
                await to_thread.run_sync(client.images.get, tag)
            except docker.errors.ImageNotFound:
                return False
        return True

    async def _ensure(
        self, image: RunnerImage, base: BaseImage, *, force: bool, on_progress: ProgressCallback | None
    ) -> ImageRef:
        plan, files = await to_thread.run_sync(self._plan, image, base)
        ref = ImageRef(tag=plan.tag, image_hash=plan.image_hash)
        if not force and await self._exists(plan.tag):
            await _report(on_progress, BuildProgress(tag=plan.tag, phase="cached"))
            return ref
        lock = self._locks.setdefault(plan.tag, anyio.Lock())
        safe = plan.tag.replace("/", "_").replace(":", "_")
        lock_file = self._settings.data_dir / "locks" / f"image-{safe}.lock"
        async with lock, _file_lock(lock_file):
            if not force and await self._exists(plan.tag):
                progress = BuildProgress(tag=plan.tag, phase="cached", message="built by another caller")
                await _report(on_progress, progress)
                return ref
            await self._build(plan, files, force=force, on_progress=on_progress)
        return ref

    async def _build(
        self,
        plan: BuildPlan,
        files: Mapping[str, bytes],
        *,
        force: bool,
        on_progress: ProgressCallback | None,
    ) -> None:
        client = await self._client()
        tag = plan.tag
        started = time.monotonic()
        log.info("image.build.start", tag=tag, base=plan.base.ref, runner=plan.image.runner)
        await _report(on_progress, BuildProgress(tag=tag, phase="building", message=f"FROM {plan.base.ref}"))
        context = await to_thread.run_sync(_tar_context, files)

        def _start() -> Iterator[dict[str, Any]]:
            stream: Iterator[dict[str, Any]] = client.api.build(
                fileobj=context,
                custom_context=True,
                tag=tag,
                buildargs=dict(plan.build_args),
                labels=dict(plan.labels),
                rm=True,
                forcerm=True,
                nocache=force,
                pull=False,
                decode=True,
            )
            return stream

        tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        error: str | None = None
        partial = ""
        with _engine_errors(tag):
            chunks = await to_thread.run_sync(_start)
            while (chunk := await to_thread.run_sync(next, chunks, _END)) is not _END:
                assert isinstance(chunk, dict)
                if "error" in chunk:
                    error = str(chunk.get("error") or "build failed")
                    continue
                text = str(chunk.get("stream") or chunk.get("status") or "")
                if not text:
                    continue
                lines = (partial + text).split("\n")
                partial = lines.pop()
                for line in lines:
                    await self._step(tag, line, tail, on_progress)
        if partial:
            await self._step(tag, partial, tail, on_progress)
        if error is None and not await self._exists(tag):
            error = "the engine reported no error but the image is missing"
        if error is not None:
            tail.append(error)
            log_tail = redact("\n".join(tail))
            if hint := tls_hint(log_tail, self._settings.extra_ca_certs):
                log_tail = f"{log_tail}\n{hint}"
            log.warning("image.build.failed", tag=tag, seconds=round(time.monotonic() - started, 1))
            await _report(on_progress, BuildProgress(tag=tag, phase="error", message=redact(error)))
            raise ImageBuildError(tag, log_tail)
        seconds = round(time.monotonic() - started, 1)
        log.info("image.build.done", tag=tag, seconds=seconds)
        await _report(on_progress, BuildProgress(tag=tag, phase="done", message=f"built in {seconds}s"))

    @staticmethod
    async def _step(tag: str, line: str, tail: deque[str], on_progress: ProgressCallback | None) -> None:
        line = line.rstrip("\r")
        if not line.strip():
            return
        line = redact(line)
        tail.append(line)
        await _report(on_progress, BuildProgress(tag=tag, phase="step", message=line))


async def _report(on_progress: ProgressCallback | None, progress: BuildProgress) -> None:
    if on_progress is not None:
        await on_progress(progress)


async def build_all(
    settings: Settings,
    on_progress: ProgressCallback | None = None,
    *,
    names: list[str] | None = None,
    force: bool = False,
) -> list[ImageRef]:
    """Build every runner image (or `names`) on the default base, one at a time (`cage images build --all`).

    With every runner (no `names`), the egress proxy's image too, so that the first isolated
    sandbox does not wait for it.

    Raises:
        ImageBuildError: a build failed; images built before it stay.
        EngineUnavailable: no engine answers.
    """
    builder = DockerImageBuilder(settings)
    refs = await build_runner_images(builder, names, force=force, on_progress=on_progress)
    if names is None:
        refs.append(await builder.ensure_image(EGRESS_IMAGE, on_progress=on_progress))
    return refs


__all__ = ["LOG_TAIL_LINES", "DockerImageBuilder", "build_all"]
