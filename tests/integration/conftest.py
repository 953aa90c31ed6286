"""Integration tests need a real Docker engine.

Every test below `tests/integration/` gets the `docker` marker. `docker_engine` pings the engine:
without one the tests are skipped with the reason, except when `CI` is set, where they fail (a CI
run that silently skips its integration tests proves nothing). Everything the tests create carries
`cage.test-run=<uuid of this session>` and is removed when the session ends.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from orchestrator.sandbox.docker.timestamps import engine_age

TEST_RUN_LABEL = "cage.test-run"
TEST_RUN_ID = uuid.uuid4().hex
EGRESS_CONTAINER = os.environ.setdefault("CAGE_EGRESS_CONTAINER", f"cage-egress-test-{TEST_RUN_ID[:8]}")
"""This session's own egress proxy (every `Settings` of the session reads it); removed at the end."""
_HERE = Path(__file__).parent

SANDBOX_TEST_DOCKERFILE = """\
FROM {base}
RUN apt-get update && apt-get install -y --no-install-recommends procps coreutils util-linux \\
    && rm -rf /var/lib/apt/lists/* && useradd -u 1000 -m -s /bin/bash sandbox
WORKDIR /workspace
"""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[docker.DockerClient]:
    """A client on a live engine; removes this session's labelled containers and volumes at the end."""
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        reason = f"no Docker engine answers ({exc}); run scripts/ensure-docker.sh"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    _remove_stale_leftovers(client)
    yield client
    selector = {"label": f"{TEST_RUN_LABEL}={TEST_RUN_ID}"}
    for container in client.containers.list(all=True, filters=selector):
        container.remove(force=True)
    for volume in client.volumes.list(filters=selector):
        volume.remove(force=True)
    for container in client.containers.list(all=True, filters={"name": EGRESS_CONTAINER}):
        container.remove(force=True)
    for network in client.networks.list(filters={"label": "cage.egress=network"}):
        try:  # another session on this engine may be removing the same leftovers
            network.reload()
            if not network.attrs.get("Containers"):  # its sandbox was removed above, without the backend
                network.remove()
        except docker.errors.APIError:
            continue
    client.close()


STALE_AFTER = 3 * 3600.0
"""A test session's things older than this are a dead session's leftovers (no test session runs that
long): sandbox and workspace names derive from fixed test identities, so a leftover workspace would
hand its files to the next run's sandbox of the same name."""


def _remove_stale_leftovers(client: docker.DockerClient) -> None:
    """Remove what a killed test session left behind (only things carrying a test-run label). In CI
    no other test session runs on the engine, so every such leftover is stale."""
    stale_after = 0.0 if os.environ.get("CI") else STALE_AFTER
    selector = {"label": TEST_RUN_LABEL}
    for container in client.containers.list(all=True, filters=selector):
        if engine_age(container.attrs.get("Created")) > stale_after:
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
    for volume in client.volumes.list(filters=selector):
        if engine_age(volume.attrs.get("CreatedAt")) > stale_after:
            with contextlib.suppress(docker.errors.APIError):
                volume.remove(force=True)


@pytest.fixture(scope="session")
def test_run_labels() -> dict[str, str]:
    """Labels to put on everything a test creates."""
    return {TEST_RUN_LABEL: TEST_RUN_ID}


@pytest.fixture(scope="session")
def sandbox_image(docker_engine: docker.DockerClient) -> str:
    """A small image with `sandbox` (uid 1000), procps and util-linux; cached by content hash."""
    base = os.environ.get("CAGE_BASE_IMAGE", "cage/base:bookworm")
    dockerfile = SANDBOX_TEST_DOCKERFILE.format(base=base)
    tag = f"cage-test/sandbox:{hashlib.sha256(dockerfile.encode()).hexdigest()[:12]}"
    try:
        docker_engine.images.get(tag)
    except docker.errors.ImageNotFound:
        docker_engine.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, forcerm=True)
    return tag
