"""The offline base image exists (made by `images/base/build.sh`) and runs containers."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parents[2]
BASE = os.environ.get("CAGE_BASE_IMAGE", "cage/base:bookworm")


def test_base_image_runs_debian_bookworm(
    docker_engine: docker.DockerClient, test_run_labels: dict[str, str]
) -> None:
    out = docker_engine.containers.run(
        BASE,
        ["sh", "-c", ". /etc/os-release && echo $VERSION_CODENAME && id -u"],
        remove=True,
        labels=test_run_labels,
        network_mode="none",
    )
    assert out.decode().split() == ["bookworm", "0"]


def test_base_image_script_is_idempotent(docker_engine: docker.DockerClient) -> None:
    before = docker_engine.images.get(BASE).id
    done = subprocess.run(
        ["bash", str(ROOT / "images/base/build.sh")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert docker_engine.images.get(BASE).id == before  # present: nothing rebuilt
