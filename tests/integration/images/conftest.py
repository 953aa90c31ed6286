"""Fixtures for the image tests: a Docker client, settings, builders, and a throwaway images folder.

The extra CA bundle comes from `CAGE_EXTRA_CA_CERTS`, else the host bundle when it exists: on
networks with TLS inspection npm and pip inside the build need it, and elsewhere it is harmless.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.sandbox.images import default_images_dir
from orchestrator.settings import Settings
from tests.integration.conftest import TEST_RUN_ID, TEST_RUN_LABEL

HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
TEST_LABEL = "cage.test"
RUN_IN_LABELS = {TEST_LABEL: "images", TEST_RUN_LABEL: TEST_RUN_ID}
"""On every `run_in` container; the session's end removes this process's only (not another worker's)."""


@pytest.fixture(scope="session")
def image_docker() -> Iterator[docker.DockerClient]:
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        (pytest.fail if os.environ.get("CI") else pytest.skip)(f"no Docker engine: {exc}")
    yield client
    selector = {"label": [f"{k}={v}" for k, v in RUN_IN_LABELS.items()]}
    for container in client.containers.list(all=True, filters=selector):
        container.remove(force=True)
    client.close()


@pytest.fixture(scope="session")
def image_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    env_ca = os.environ.get("CAGE_EXTRA_CA_CERTS")
    extra_ca = Path(env_ca) if env_ca else (HOST_CA_BUNDLE if HOST_CA_BUNDLE.is_file() else None)
    base = os.environ.get("CAGE_BASE_IMAGE", "cage/base:bookworm")
    return Settings(data_dir=tmp_path_factory.mktemp("cage-data"), extra_ca_certs=extra_ca, base_image=base)


@pytest.fixture(scope="session")
def builder(image_docker: docker.DockerClient, image_settings: Settings) -> DockerImageBuilder:
    """A builder on the real `images/` folder."""
    return DockerImageBuilder(image_docker, settings=image_settings)


@pytest.fixture
def scratch_images(tmp_path: Path, image_docker: docker.DockerClient) -> Iterator[Path]:
    """An `images/` folder whose `tools` Dockerfile is unique to this test (so it is never cached).

    Images built from it are removed afterwards.
    """
    marker = uuid.uuid4().hex
    folder = tmp_path / "images" / "tools"
    folder.mkdir(parents=True)
    shutil.copy(default_images_dir() / "common" / "cage-ca.sh", folder / "cage-ca.sh")
    (folder / "Dockerfile").write_text(
        "ARG BASE_IMAGE=debian:bookworm-slim\n"
        "FROM ${BASE_IMAGE}\n"
        f"RUN echo {marker} > /marker && sleep 2\n"
        "LABEL cage.runner=yaocode cage.cli-version=none\n"
    )
    yield folder.parent
    for image in image_docker.images.list(filters={"label": "cage.runner=yaocode"}):
        for tag in image.tags:
            if tag.startswith("cage/tools:") and _has_marker(image, marker):
                image_docker.images.remove(tag, force=True)


def _has_marker(image: docker.models.images.Image, marker: str) -> bool:
    history = image.history()
    return any(marker in (layer.get("CreatedBy") or "") for layer in history)


def run_in(client: docker.DockerClient, tag: str, script: str) -> str:
    """Run `script` with bash in a fresh container of `tag` (as the image's default user); its stdout."""
    out: bytes = client.containers.run(
        tag, ["bash", "-c", script], remove=True, labels=RUN_IN_LABELS, stderr=True
    )
    return out.decode()
