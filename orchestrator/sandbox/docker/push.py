"""`cage images push`: build the runner images on each base, tag them for a registry and push them
there (the registry a Kubernetes cluster pulls sandbox images from, `Settings.k8s_registry`), and
what the images manifest records of those bases."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import docker
import docker.errors
from anyio import to_thread

from orchestrator.errors import EngineUnavailable, SandboxError
from orchestrator.sandbox.docker.builder import DockerImageBuilder, build_all
from orchestrator.sandbox.docker.clients import api_client, docker_client
from orchestrator.sandbox.images import (
    RUNNER_IMAGES,
    RUNNER_LABEL,
    BaseImage,
    ImageRef,
    ProgressCallback,
    runner_image,
)
from orchestrator.sandbox.kubernetes.manifests import image_ref
from orchestrator.settings import Settings

OnLine = Callable[[str, str], Awaitable[None]]
"""(target, status line) while pushing."""


def _split(ref: str) -> tuple[str, str]:
    repo, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:
        return ref, "latest"
    return repo, tag


def _push_one(api: docker.APIClient, source: str, target: str) -> list[str]:
    repo, tag = _split(target)
    api.tag(source, repo, tag=tag)
    lines: list[str] = []
    for item in api.push(repo, tag=tag, stream=True, decode=True):
        if item.get("error"):
            raise SandboxError(target, f"push refused: {str(item['error'])[:300]}")
        status = " ".join(str(item[k]) for k in ("status", "progress") if item.get(k))
        if status:
            lines.append(status)
    return lines


async def base_image_id(settings: Settings, ref: str) -> str:
    """The engine's id (`sha256:...`) of the base image `ref` the runner images were built on:
    what the Kubernetes backend's registry resolver needs to compute their tags without Docker.

    Raises:
        SandboxError: the engine does not have `ref`.
        EngineUnavailable: no engine answers.
    """
    return (await base_image(settings, ref)).id


async def base_image(settings: Settings, ref: str) -> BaseImage:
    """The base image `ref` as the engine has it (id and labels).

    Raises:
        SandboxError: the engine does not have `ref`.
        EngineUnavailable: no engine answers.
    """

    def inspect() -> BaseImage:
        client = docker_client(settings)
        try:
            found = client.images.get(ref)
            labels = (found.attrs.get("Config") or {}).get("Labels") or {}
            return BaseImage(ref=ref, id=str(found.id), labels=dict(labels))
        finally:
            client.close()

    try:
        return await to_thread.run_sync(inspect)
    except docker.errors.ImageNotFound:
        raise SandboxError(ref, "base image not in the engine") from None
    except docker.errors.APIError as exc:
        raise SandboxError(ref, f"inspect failed: {exc.explanation or exc}") from None
    except docker.errors.DockerException as exc:
        raise EngineUnavailable(str(exc)) from None


@dataclass
class PushSet:
    """The images `cage images push` pushes and what the images manifest records of their bases."""

    tags: list[str] = field(default_factory=list)
    """Local tags to push (runner images; a ready image's own reference), each once."""
    base_images: dict[str, str] = field(default_factory=dict)
    """Base reference -> its image id."""
    ready_images: dict[str, str] = field(default_factory=dict)
    """Base reference -> the runner it is a ready image of."""

    def add(self, ref: ImageRef) -> None:
        if ref.tag not in self.tags:
            self.tags.append(ref.tag)


async def images_for_bases(
    settings: Settings,
    bases: Sequence[str],
    *,
    names: Sequence[str] | None = None,
    on_progress: ProgressCallback | None = None,
    builder: DockerImageBuilder | None = None,
) -> PushSet:
    """Build (or find) the images of `names` (None: every runner) on each of `bases`, as a sandbox
    whose `computer.image` names that base gets them: on `CAGE_BASE_IMAGE` also the egress proxy's
    image (with every runner); a base labelled `cage.runner` is that runner's image itself.

    Raises:
        ImageBuildError: a base is missing and cannot be pulled, or a build failed.
        EngineUnavailable: no engine answers.
    """
    builder = builder or DockerImageBuilder(settings)
    found = PushSet()
    for base in dict.fromkeys(bases):
        if base == settings.base_image:
            refs = await build_all(settings, on_progress, names=list(names) if names else None)
        else:
            runners = [runner_image(n).runner for n in names] if names else list(RUNNER_IMAGES)
            refs = [await builder.ensure(r, base=base, on_progress=on_progress) for r in runners]
        for ref in refs:
            found.add(ref)
        image = await base_image(settings, base)
        found.base_images[base] = image.id
        runner = image.labels.get(RUNNER_LABEL)
        if runner:
            found.ready_images[base] = runner
    return found


async def push_images(
    settings: Settings, tags: Sequence[str], registry: str, on_line: OnLine | None = None
) -> dict[str, str]:
    """Push `tags` as `<registry>/<tag>` (the name the Kubernetes backend's pods use); returns
    each pushed tag's reference there. A reference already naming a registry (a ready image such as
    `ghcr.io/org/img:1`) is pulled from there by the pods: it is not pushed, and not returned.
    Registry credentials come from the engine client's own config (`docker login`).

    Raises:
        SandboxError: the registry refused an image (the message names it).
        EngineUnavailable: no engine answers.
    """
    if not registry:
        raise SandboxError("", "no registry: pass --registry or set CAGE_K8S_REGISTRY")

    try:
        api = await to_thread.run_sync(api_client, settings)
    except docker.errors.DockerException as exc:
        raise EngineUnavailable(str(exc)) from None
    pushed: dict[str, str] = {}
    try:
        for source in tags:
            target = image_ref(source, registry)
            if target == source:
                continue
            try:
                lines = await to_thread.run_sync(_push_one, api, source, target)
            except docker.errors.APIError as exc:
                raise SandboxError(target, f"push failed: {exc.explanation or exc}") from None
            if on_line is not None:
                for line in lines[-3:]:
                    await on_line(target, line)
            pushed[source] = target
    finally:
        api.close()
    return pushed
