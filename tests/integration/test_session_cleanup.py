"""The start-of-session sweep (`remove_leftovers`) under a fake label, so the real sweep of this
engine's test sessions is not what runs: in CI mode (stale after 0 s) it removes another run's
containers, volumes and empty sandbox networks, never one of a worker of this run; outside CI a
young leftover stays."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import docker
import pytest

from tests.integration.conftest import remove_leftovers
from tests.run_ids import process_run_id

DEAD_RUN = "0123456789abcdef" * 2
"""A `cage.test-run` value no process of this run makes."""


@pytest.fixture
def probe() -> str:
    return f"cage.test-sweep-probe-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def made(
    docker_engine: docker.DockerClient, probe: str, test_run_labels: dict[str, str]
) -> Iterator[dict[str, str]]:
    """A created container, a volume and an empty sandbox network of another worker of this run,
    and of a dead run."""
    image = os.environ.get("CAGE_BASE_IMAGE", "cage/base:bookworm")
    names: dict[str, str] = {}
    for who, run in (("worker", process_run_id()), ("dead", DEAD_RUN)):
        labels = {**test_run_labels, probe: run}  # the real label too: the session end removes what is left
        names[f"{who}-container"] = docker_engine.containers.create(image, ["true"], labels=labels).name
        names[f"{who}-volume"] = docker_engine.volumes.create(
            f"cage-sweep-{uuid.uuid4().hex[:12]}", labels=labels
        ).name
        # a box's network carries the box's labels; no egress label here: another worker's proxy
        # would otherwise take this network for a sandbox's and serve it
        names[f"{who}-network"] = docker_engine.networks.create(
            f"cage-sweep-{uuid.uuid4().hex[:12]}-net", internal=True, labels=labels
        ).name
    yield names


def _left(client: docker.DockerClient, probe: str) -> set[str]:
    containers = {c.name for c in client.containers.list(all=True, filters={"label": probe})}
    networks = {n.name for n in client.networks.list(filters={"label": probe})}
    return containers | networks | {v.name for v in client.volumes.list(filters={"label": probe})}


def test_outside_ci_a_young_leftover_of_another_run_stays(
    docker_engine: docker.DockerClient, probe: str, made: dict[str, str]
) -> None:
    assert remove_leftovers(docker_engine, stale_after=3600.0, label=probe) == []
    assert _left(docker_engine, probe) == set(made.values())


def test_in_ci_mode_only_the_other_runs_leftovers_go(
    docker_engine: docker.DockerClient, probe: str, made: dict[str, str]
) -> None:
    gone = remove_leftovers(docker_engine, stale_after=0.0, label=probe)
    assert sorted(gone) == sorted([made["dead-container"], made["dead-volume"], made["dead-network"]])
    assert _left(docker_engine, probe) == {
        made["worker-container"],
        made["worker-volume"],
        made["worker-network"],
    }
