"""A missing base image in Cage's own namespace is never pulled: `docker.io/cage` is not Cage's."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from orchestrator.errors import ImageBuildError
from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.settings import Settings


async def test_a_missing_offline_base_says_how_to_build_it(
    image_docker: docker.DockerClient, tmp_path: Path
) -> None:
    ref = "cage/no-such-base:test"
    settings = Settings(data_dir=tmp_path, base_image=ref)
    with pytest.raises(ImageBuildError) as caught:
        await DockerImageBuilder(image_docker, settings=settings).ensure("tools")
    message = str(caught.value)
    assert "make base-image" in message and "CAGE_BASE_IMAGE=debian:bookworm-slim" in message
    assert not image_docker.images.list(name="cage/no-such-base")
