"""`cage images push`: tag the locally built runner images for a registry and push them there
(the registry a Kubernetes cluster pulls sandbox images from, `Settings.k8s_registry`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import docker
import docker.errors
from anyio import to_thread

from orchestrator.errors import EngineUnavailable, SandboxError
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

    def inspect() -> str:
        client = (
            docker.DockerClient(base_url=settings.docker_host) if settings.docker_host else docker.from_env()
        )
        try:
            return str(client.images.get(ref).id)
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


async def push_images(
    settings: Settings, tags: Sequence[str], registry: str, on_line: OnLine | None = None
) -> list[str]:
    """Push `tags` as `<registry>/<tag>` (the name the Kubernetes backend's pods use); returns
    the pushed references. Registry credentials come from the engine client's own config
    (`docker login`).

    Raises:
        SandboxError: the registry refused an image (the message names it).
        EngineUnavailable: no engine answers.
    """
    if not registry:
        raise SandboxError("", "no registry: pass --registry or set CAGE_K8S_REGISTRY")

    def connect() -> docker.APIClient:
        if settings.docker_host:
            return docker.APIClient(base_url=settings.docker_host, version="auto")
        return docker.APIClient(**docker.utils.kwargs_from_env(), version="auto")

    try:
        api = await to_thread.run_sync(connect)
    except docker.errors.DockerException as exc:
        raise EngineUnavailable(str(exc)) from None
    pushed: list[str] = []
    try:
        for source in tags:
            target = image_ref(source, registry)
            try:
                lines = await to_thread.run_sync(_push_one, api, source, target)
            except docker.errors.APIError as exc:
                raise SandboxError(target, f"push failed: {exc.explanation or exc}") from None
            if on_line is not None:
                for line in lines[-3:]:
                    await on_line(target, line)
            pushed.append(target)
    finally:
        api.close()
    return pushed
