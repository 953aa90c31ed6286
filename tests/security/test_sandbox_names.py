"""H5 / L11: workspace names are injective and scoped, on the real engine.

Owner `acme` asking for `workspace_id: ci-default` used to mount owner `acme-ci`'s default
workspace (`cage-ws-acme-ci-default`). Each attack writes a secret as the victim and looks for
it as the attacker; the engine's own volume list is checked after.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import docker
import pytest

from orchestrator.dsl.sandbox import Lifecycle
from tests.security.sandbox_rig import *  # noqa: F403 - the fixtures
from tests.security.sandbox_rig import request, sh, spec

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("victim_workspace", [None, "default"])
async def test_cross_owner_workspace_id_does_not_reach_another_owner(
    make_manager: Any, tmp_path: Path, docker_engine: docker.DockerClient, victim_workspace: str | None
) -> None:
    manager = make_manager()
    victim = await manager.acquire(
        request(tmp_path, spec(lifecycle="longrunning"), owner="acme-ci", workspace_id=victim_workspace)
    )
    assert (await sh(manager, victim, "echo token-of-acme-ci > /workspace/secret.txt"))[1] == 0
    await manager.release(victim)
    attacker = await manager.acquire(
        request(tmp_path, spec(lifecycle="longrunning"), owner="acme", workspace_id="ci-default")
    )
    lines, code, _ = await sh(manager, attacker, "cat /workspace/secret.txt 2>&1; ls -A /workspace")
    assert b"token-of-acme-ci" not in b"\n".join(lines) and code == 0
    mounts = {m["Name"] for m in docker_engine.containers.get(attacker.ref.id).attrs["Mounts"]}
    victims = {m["Name"] for m in docker_engine.containers.get(victim.ref.id).attrs["Mounts"]}
    assert mounts.isdisjoint(victims)
    labels = docker_engine.volumes.get(next(iter(mounts))).attrs["Labels"]
    assert labels["cage.owner"] == "acme" and labels["cage.workspace"] == "ci-default"
    await manager.release(attacker)


async def test_default_workspace_belongs_to_one_assistant_and_workspace_id_shares(
    make_manager: Any, tmp_path: Path
) -> None:
    manager = make_manager()
    owner = "team7"

    def req(assistant: str, workspace: str | None) -> Any:
        r = request(tmp_path, spec(lifecycle="longrunning"), owner=owner, workspace_id=workspace)
        return r.model_copy(update={"assistant_id": assistant})

    one = await manager.acquire(req("a.one", None))
    await sh(manager, one, "echo private > /workspace/mine.txt")
    await manager.release(one)
    two = await manager.acquire(req("a.two", None))
    assert (await sh(manager, two, "cat /workspace/mine.txt"))[1] != 0  # another assistant: not shared
    await manager.release(two)
    shared = [await manager.acquire(req(a, "team-room")) for a in ("a.one", "a.two")]
    await sh(manager, shared[0], "echo hello > /workspace/room.txt")
    assert (await sh(manager, shared[1], "cat /workspace/room.txt"))[0] == [b"hello"]
    for lease in shared:
        await manager.release(lease)
    assert shared[0].identity.lifecycle is Lifecycle.LONGRUNNING


async def test_an_old_volume_is_copied_into_the_new_workspace_and_kept(
    make_manager: Any,
    tmp_path: Path,
    docker_engine: docker.DockerClient,
    sandbox_image: str,
    case_labels: dict[str, str],
) -> None:
    """Upgrade path: `cage-ws-<owner>-default` (pre-digest) is adopted by copy, never orphaned."""
    owner = f"legacy{uuid.uuid4().hex[:6]}"
    old = f"cage-ws-{owner}-default"
    docker_engine.volumes.create(old, labels={**case_labels, "cage.managed": "true"})
    docker_engine.containers.run(
        sandbox_image,
        ["sh", "-c", "echo from-before > /w/notes.txt && ln -s /etc/passwd /w/link && chown -R 1000:1000 /w"],
        volumes={old: {"bind": "/w"}},
        user="0",
        remove=True,
        labels=case_labels,
    )
    manager = make_manager()
    lease = await manager.acquire(request(tmp_path, spec(lifecycle="longrunning"), owner=owner))
    lines, _, _ = await sh(
        manager, lease, "cat /workspace/notes.txt; readlink /workspace/link; stat -c %u /workspace"
    )
    assert lines == [b"from-before", b"/etc/passwd", b"1000"]  # copied as-is, links not followed
    assert docker_engine.volumes.get(old).name == old  # kept for the operator
    await manager.release(lease)
