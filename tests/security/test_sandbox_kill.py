"""M14 / issue 11 item 8: cancel and turn end are a hard kill in every lifecycle.

The agent starts writers that leave the exec's process group (`setsid`, `nohup ... &`) and keep
appending to the workspace. After the turn ends (or is cancelled) `ps` in the box shows none of
them and the file stops growing; a background prepare step Cage started survives. No control
file the agent could rewrite is involved (the old pid files lived in a world-writable `/tmp`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import docker
import pytest

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.sandbox.manager import SandboxManager
from orchestrator.settings import Settings
from tests.integration.pipeline.conftest import HOST_CA
from tests.security.sandbox_rig import *  # noqa: F403 - the fixtures
from tests.security.sandbox_rig import request, sh, spec

pytestmark = pytest.mark.docker

WRITERS = (
    "setsid sh -c 'while :; do date +%s%N >> /workspace/late-setsid; sleep 0.1; done' >/dev/null 2>&1 < /dev/null & "
    "nohup sh -c 'while :; do date +%s%N >> /workspace/late-nohup; sleep 0.1; done' >/dev/null 2>&1 & "
    "sleep 0.5; echo started"
)
LIFECYCLES = ["session", "longrunning", "persistent"]


STRAYS = (
    "ps -eo pid=,ppid=,args= | awk '/[l]ate-/ { parent[$1] = $2; line[$1] = $0 } "
    "END { for (p in parent) if (!(parent[p] in parent)) print line[p] }'"
)
"""The writers still running, one line each: a process whose parent is a writer is that writer
forking `date` or `sleep`, caught before its exec (it shows the writer's command line for an
instant), not a writer of its own."""


async def _strays(manager: Any, lease: Any) -> list[bytes]:
    lines, _, _ = await sh(manager, lease, STRAYS)
    return lines


async def _growing(manager: Any, lease: Any) -> bool:
    first, _, _ = await sh(manager, lease, "cat /workspace/late-* 2>/dev/null | wc -l")
    await anyio.sleep(0.6)
    second, _, _ = await sh(manager, lease, "cat /workspace/late-* 2>/dev/null | wc -l")
    return first != second


@pytest.mark.parametrize("lifecycle", LIFECYCLES)
async def test_detached_writers_are_gone_after_the_turn(
    make_manager: Any, tmp_path: Path, lifecycle: str
) -> None:
    manager = make_manager()
    background = [{"action": "exec", "cmd": "exec sleep 3000", "background": True, "once": True}]
    req = request(tmp_path, spec(lifecycle=lifecycle, prepare=background), session_id="k1")
    turn = await manager.acquire(req)
    assert (await sh(manager, turn, WRITERS))[0] == [b"started"]
    assert len(await _strays(manager, turn)) == 2
    await manager.release(turn)
    after = await manager.acquire(req)
    assert await _strays(manager, after) == []
    assert not await _growing(manager, after)
    lines, _, _ = await sh(manager, after, "ps -eo args | grep -c '^[s]leep 3000'")
    assert lines == [b"1"]  # Cage's own background step survives (and was not started twice)
    await manager.release(after)


@pytest.mark.serial  # its 3 s budget covers creating the box too: under parallel load that took longer
@pytest.mark.parametrize("lifecycle", LIFECYCLES)
async def test_detached_writers_are_gone_after_cancel(
    make_manager: Any, tmp_path: Path, lifecycle: str
) -> None:
    manager = make_manager()
    req = request(tmp_path, spec(lifecycle=lifecycle), session_id="k2")
    with anyio.move_on_after(3):
        async with manager.lease(req) as lease:
            await sh(manager, lease, WRITERS + "; sleep 600")  # cancelled mid-turn
    again = await manager.acquire(req)
    assert again.ref.id == lease.ref.id
    assert await _strays(manager, again) == []
    assert not await _growing(manager, again)
    await manager.release(again)


async def test_no_world_writable_control_files(make_manager: Any, tmp_path: Path) -> None:
    manager = make_manager()
    lease = await manager.acquire(request(tmp_path, spec(lifecycle="session"), session_id="k3"))
    lines, _, _ = await sh(
        manager, lease, "ls -d /tmp/.cage-exec 2>/dev/null; find / -xdev -perm -0002 -type f 2>/dev/null"
    )
    assert lines == []
    await manager.release(lease)


@pytest.mark.slow
async def test_opencodes_resident_server_survives_and_a_lookalike_does_not(
    docker_engine: docker.DockerClient, tmp_path: Path, case_labels: dict[str, str]
) -> None:
    """The serve driver's `opencode serve` (the image's binary) is kept between turns; a copy of
    that binary the agent runs from the workspace under the same argv is a stray like any other."""
    settings = Settings(data_dir=tmp_path / "cage", extra_ca_certs=HOST_CA)
    manager = SandboxManager(
        DockerBackend(settings), DockerImageBuilder(settings), settings, extra_labels=case_labels
    )
    req = request(
        tmp_path,
        SandboxSpec.model_validate(
            {"version": "2.0", "runner": {"name": "opencode"}, "lifecycle": "session"}
        ),
    ).model_copy(update={"session_id": "oc"})
    try:
        turn = await manager.acquire(req)
        start = (
            "cd /tmp && setsid opencode serve --hostname 127.0.0.1 --port 4096 >/tmp/oc.log 2>&1 </dev/null & "
            # the real server listening before the lookalike starts: in one CI run two first starts
            # at once left only one of them running
            "for i in $(seq 1 240); do grep -q listening /tmp/oc.log 2>/dev/null && break; sleep 0.5; done; "
            "cp /usr/local/bin/opencode /workspace/opencode && "
            "(cd /workspace && setsid ./opencode serve --hostname 127.0.0.1 --port 4097 >/dev/null 2>&1 </dev/null &); "
            # both up (the copy of a large binary and two starts take a while under load); counted by
            # the start of their argv, as this script's own `sh -c` names `opencode serve` too
            "for i in $(seq 1 120); do [ \"$(ps -eo args | grep -cE '^(\\./)?opencode serve')\" = 2 ] && break; "
            "sleep 0.5; done; echo started"
        )
        assert (await sh(manager, turn, start))[0] == [b"started"]
        before, _, _ = await sh(manager, turn, "ps -eo args | grep -c '[o]pencode serve'")
        assert before == [b"2"]  # the real server and the lookalike both run
        await manager.release(turn)
        after = await manager.acquire(req)
        lines, _, _ = await sh(manager, after, "ps -eo args | grep '[o]pencode serve'")
        assert lines == [b"opencode serve --hostname 127.0.0.1 --port 4096"]
        await manager.release(after)
    finally:
        for container in docker_engine.containers.list(
            all=True, filters={"label": [f"{k}={v}" for k, v in case_labels.items()]}
        ):
            container.remove(force=True)
