"""Integration tests need a real Docker engine.

Every test below `tests/integration/` gets the `docker` marker. `docker_engine` pings the engine:
without one the tests are skipped with the reason, except when `CI` is set, where they fail (a CI
run that silently skips its integration tests proves nothing). Everything the tests create carries
`cage.test-run=<id of this process>` and is removed when the session ends.

Under pytest-xdist every worker is a session of its own: its own `TEST_RUN_ID`, egress proxy and
fake model servers; its end removes only its own things. The sweep of dead sessions' leftovers at the
start never touches another worker's (`tests/run_ids.py`: every id of one run ends in `TEST_RUN`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import docker.models.volumes
import pytest

from orchestrator.sandbox.docker.egress import SANDBOX_LABEL, SWEEP_MIN_AGE
from orchestrator.sandbox.docker.proxy import EGRESS_LABEL
from orchestrator.sandbox.docker.timestamps import engine_age
from tests.run_ids import of_this_run, per_worker, process_run_id

TEST_RUN_LABEL = "cage.test-run"
TEST_RUN_ID = process_run_id()
EGRESS_CONTAINER = per_worker(
    os.environ.get("CAGE_EGRESS_CONTAINER") or f"cage-egress-test-{TEST_RUN_ID[:8]}"
)
"""This session's own egress proxy (every `Settings` of the session reads it); removed at the end.
Per worker: a name the controller or the user set is inherited by every worker, so each adds its id."""
os.environ["CAGE_EGRESS_CONTAINER"] = EGRESS_CONTAINER
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
    remove_leftovers(client, stale_after=0.0 if os.environ.get("CI") else STALE_AFTER)
    yield client
    selector = {"label": f"{TEST_RUN_LABEL}={TEST_RUN_ID}"}
    removed: set[str] = set()
    for container in client.containers.list(all=True, filters=selector, ignore_removed=True):
        removed.add(container.name)
        with contextlib.suppress(docker.errors.NotFound):  # its own `cage run` removed it meanwhile
            container.remove(force=True)
    for volume in client.volumes.list(filters=selector):
        _remove_when_free(client, volume)
    for container in client.containers.list(
        all=True, filters={"name": EGRESS_CONTAINER}, ignore_removed=True
    ):
        if container.name == EGRESS_CONTAINER:  # the filter matches substrings: not gw10's for gw1
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
    _remove_orphan_networks(client, removed)
    client.close()


def _remove_when_free(
    client: docker.DockerClient, volume: docker.models.volumes.Volume, *, wait: float = 10.0
) -> None:
    """Remove this session's `volume`. While a box of this session still holds it (the app's own
    removal of the box still under way), wait for it, up to `wait` seconds. A volume named from a
    fixed identity (owner, assistant) may be mounted by another session's box on this engine: in
    use by that one, it is theirs to clean, and the rest of the cleanup goes on."""
    deadline = time.monotonic() + wait
    while True:
        try:
            volume.remove(force=True)
            return
        except docker.errors.NotFound:
            return
        except docker.errors.APIError:
            users = client.containers.list(all=True, filters={"volume": volume.name}, ignore_removed=True)
            if time.monotonic() > deadline or any(c.labels.get(TEST_RUN_LABEL) != TEST_RUN_ID for c in users):
                return
            time.sleep(0.2)


def _remove_orphan_networks(client: docker.DockerClient, removed: set[str]) -> None:
    """Remove the empty sandbox networks of this session: those carrying its label (a box's network
    carries the box's labels; a test that removed its box behind Cage's back leaves it) or of the
    boxes removed above (without the backend, which would have removed them); and empty ones older
    than the backend's own sweep age. A young empty network of another box may be another worker's,
    between its creation and its box's start."""
    for network in client.networks.list(filters={"label": f"{EGRESS_LABEL}=network"}):
        try:  # another session on this engine may be removing the same leftovers
            network.reload()
            labels = network.attrs.get("Labels") or {}
            mine = labels.get(TEST_RUN_LABEL) == TEST_RUN_ID or labels.get(SANDBOX_LABEL) in removed
            if not network.attrs.get("Containers") and (
                mine or engine_age(network.attrs.get("Created")) > SWEEP_MIN_AGE
            ):
                network.remove()
        except docker.errors.APIError:
            continue


STALE_AFTER = 3 * 3600.0
"""A test session's things older than this are a dead session's leftovers (no test session runs that
long): sandbox and workspace names derive from fixed test identities, so a leftover workspace would
hand its files to the next run's sandbox of the same name."""


def remove_leftovers(
    client: docker.DockerClient, *, stale_after: float, label: str = TEST_RUN_LABEL
) -> list[str]:
    """Remove what killed test sessions left behind: containers, volumes and empty sandbox networks
    carrying `label` whose value is not of this run (`of_this_run`: no worker of this run is ever
    touched) and older than `stale_after` seconds. In CI (`stale_after=0`) no other test session runs on the engine, so
    every other run's leftover is stale. Returns the names removed."""
    gone: list[str] = []
    # another worker's container may go between the listing and its inspect: skip it then
    for container in client.containers.list(all=True, filters={"label": label}, ignore_removed=True):
        if _stale(container.labels.get(label, ""), container.attrs.get("Created"), stale_after):
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
                gone.append(container.name)
    for volume in client.volumes.list(filters={"label": label}):
        labels = volume.attrs.get("Labels") or {}
        if _stale(labels.get(label, ""), volume.attrs.get("CreatedAt"), stale_after):
            with contextlib.suppress(docker.errors.APIError):
                volume.remove(force=True)
                gone.append(volume.name)
    for network in client.networks.list(filters={"label": label}):  # a box's network has its labels
        with contextlib.suppress(docker.errors.APIError):  # in use, or removed meanwhile
            network.reload()
            labels = network.attrs.get("Labels") or {}
            if not network.attrs.get("Containers") and _stale(
                labels.get(label, ""), network.attrs.get("Created"), stale_after
            ):
                network.remove()
                gone.append(network.name)
    return gone


def _stale(run: str, created: object, stale_after: float) -> bool:
    return not of_this_run(run) and engine_age(created) > stale_after


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
