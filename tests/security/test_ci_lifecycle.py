"""H4: when `cage run` exits, its sandbox and every process in it are gone, whatever the lifecycle.

Before: a `session`/`longrunning`/`persistent` assistant's box stayed up with the checkout mounted,
and a `nohup` writer the agent started went on changing the checkout during later CI steps.
"""

from __future__ import annotations

import time
from pathlib import Path

import docker
import pytest

from tests.security.ci_rig import *  # noqa: F403 - the fixtures
from tests.security.ci_rig import App, attack, boxes, cage_run, own, repo

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.parametrize("lifecycle", ["session", "persistent"])
def test_a_background_writer_is_gone_when_cage_run_exits(
    app: App, tmp_path: Path, docker_engine: docker.DockerClient, lifecycle: str
) -> None:
    ws = own(repo(tmp_path / "ws"))
    writer = "nohup sh -c 'sleep 6; echo late > /workspace/late.txt' >/dev/null 2>&1 & echo started"
    started = time.monotonic()
    result = cage_run(app, attack(app, writer, lifecycle=lifecycle), ws, "leave a writer behind")
    assert result.code == 0, result.stderr[-2000:]
    assert boxes(docker_engine, app) == []
    time.sleep(max(0.0, started + 10 - time.monotonic()))
    assert not (ws / "late.txt").exists()
