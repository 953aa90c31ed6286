"""The Kubernetes backend's tags, computed without an engine from what `cage images push --manifest`
records, are the tags the Docker builder gives the images it built, on every base pushed."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator

import docker
import pytest

from orchestrator.errors import ImageBuildError
from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.sandbox.docker.push import base_image_id, images_for_bases
from orchestrator.sandbox.images import RUNNER_IMAGES, ImagesManifest
from orchestrator.sandbox.kubernetes.registry_images import RegistryImageResolver
from orchestrator.settings import Settings
from tests.integration.conftest import TEST_RUN_ID, TEST_RUN_LABEL

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


@pytest.fixture
def other_bases(image_docker: docker.DockerClient, image_settings: Settings) -> Iterator[tuple[str, str]]:
    """Two more `computer.image`s on this engine: the default base under another name, and a ready
    image of yaocode built on it (labelled `cage.runner`); removed afterwards."""
    run = uuid.uuid4().hex[:10]
    alias, ready = f"cage-test/base-alias:{run}", f"cage-test/ready-yaocode:{run}"
    image_docker.images.get(image_settings.base_image).tag(alias)
    dockerfile = (
        f"FROM {image_settings.base_image}\nLABEL cage.runner=yaocode {TEST_RUN_LABEL}={TEST_RUN_ID}\n"
    )
    image_docker.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=ready, rm=True)
    try:
        yield alias, ready
    finally:
        for tag in (ready, alias):
            image_docker.images.remove(tag, force=False)


async def test_push_records_every_base_and_the_resolver_names_what_the_builder_made(
    builder: DockerImageBuilder, image_settings: Settings, other_bases: tuple[str, str]
) -> None:
    alias, ready = other_bases
    default = image_settings.base_image
    found = await images_for_bases(
        image_settings, [default, alias, ready, alias], names=["yaocode"], builder=builder
    )
    assert list(found.base_images) == [default, alias, ready]
    assert found.ready_images == {ready: "yaocode"}
    assert ready in found.tags  # pushed as is (under the registry prefix)
    settings = image_settings.model_copy(update={"backend": "kubernetes", "k8s_registry": "r.example/cage"})
    manifest = ImagesManifest(
        registry=settings.k8s_registry,
        base_images=found.base_images,
        ready_images=found.ready_images,
        images={tag: f"r.example/cage/{tag}" for tag in found.tags},
    )
    resolver = RegistryImageResolver(settings, manifest=manifest)
    for base in (default, alias, ready):
        built = await builder.ensure("yaocode", base=base)
        assert built.tag in found.tags
        assert resolver.plan_tag(RUNNER_IMAGES["yaocode"], base) == built
    assert resolver.plan_tag(RUNNER_IMAGES["yaocode"], ready).tag == ready
    with pytest.raises(ImageBuildError, match=rf"--base {default} --base debian:unpushed`"):
        resolver.plan_tag(RUNNER_IMAGES["yaocode"], "debian:unpushed")
