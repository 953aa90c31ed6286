"""The Kubernetes backend's tags, computed without an engine from what `cage images push --manifest`
records, are the tags the Docker builder gives the images it built."""

from __future__ import annotations

import pytest

from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.sandbox.docker.push import base_image_id
from orchestrator.sandbox.images import RUNNER_IMAGES, ImagesManifest
from orchestrator.sandbox.kubernetes.registry_images import RegistryImageResolver
from orchestrator.settings import Settings

pytestmark = pytest.mark.docker


async def test_the_resolver_names_the_image_the_docker_builder_built(
    builder: DockerImageBuilder, image_settings: Settings
) -> None:
    built = await builder.ensure("yaocode")
    base_id = await base_image_id(image_settings, image_settings.base_image)
    assert base_id.startswith("sha256:")
    settings = image_settings.model_copy(update={"backend": "kubernetes", "k8s_registry": "r.example/cage"})
    manifest = ImagesManifest(
        registry=settings.k8s_registry,
        base_images={settings.base_image: base_id},
        images={built.tag: f"r.example/cage/{built.tag}"},
    )
    resolver = RegistryImageResolver(settings, manifest=manifest)
    assert resolver.plan_tag(RUNNER_IMAGES["yaocode"], settings.base_image) == built
