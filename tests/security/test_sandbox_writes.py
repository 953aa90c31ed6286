"""L4 / issue 11 item 2: files Cage writes into a box never follow a symlink the agent planted.

The agent replaces `attachments/` with a link to `/etc` (and `.cage-state` with a link to `/`),
then Cage writes the user's next attachment, a prepare `file` step and runner files. Before,
the engine extracted them as root through the links. Now they are written by the sandbox user
with tar, which replaces the links; the assertions look at the container's real `/etc` and `/`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import docker
import pytest

from orchestrator.errors import SandboxError, WorkspaceError
from orchestrator.pipeline.contract import Attachment
from orchestrator.pipeline.stages.sandbox import write_attachments
from orchestrator.sandbox.backend import FileEntry
from orchestrator.sandbox.docker.archive import files_tar
from tests.security.sandbox_rig import *  # noqa: F403 - the fixtures
from tests.security.sandbox_rig import request, sh, spec

pytestmark = pytest.mark.docker


async def test_attachment_through_an_etc_symlink_lands_in_attachments(
    make_manager: Any, tmp_path: Path
) -> None:
    manager = make_manager()
    lease = await manager.acquire(request(tmp_path, spec(lifecycle="session"), session_id="c1"))
    plant = "rm -rf /workspace/attachments; ln -s /etc /workspace/attachments; echo orig > /tmp/victim"
    assert (await sh(manager, lease, plant))[1] == 0
    await write_attachments(manager, lease, [Attachment(name="cage-planted", content=b"payload")])
    lines, _, _ = await sh(
        manager,
        lease,
        "ls /etc/cage-planted 2>&1; test -L /workspace/attachments && echo link; cat /workspace/attachments/cage-planted",
    )
    assert lines[0].endswith(b"No such file or directory")
    assert lines[1:] == [b"payload"]
    # a file-level link is replaced too, not written through
    await sh(manager, lease, "ln -sf /tmp/victim /workspace/attachments/again")
    await write_attachments(manager, lease, [Attachment(name="again", content=b"new")])
    lines, _, _ = await sh(manager, lease, "cat /tmp/victim; cat /workspace/attachments/again")
    assert lines == [b"orig", b"new"]
    await manager.release(lease)


async def test_no_root_side_write_or_chown_through_a_planted_root_link(
    make_manager: Any, tmp_path: Path
) -> None:
    """The `.cage -> /` trick: a write below it used to chown the container's `/` to uid 1000."""
    manager = make_manager()
    lease = await manager.acquire(request(tmp_path, spec(lifecycle="session"), session_id="c2"))
    await sh(manager, lease, "ln -s / /workspace/.cage-state; ln -s /usr/bin /workspace/bin")
    entry = FileEntry(path=".cage-state/etc/cage-x", content=b"x", uid=1000, gid=1000)
    await manager.backend.put_files(lease.ref, "/workspace", [entry])
    lines, _, _ = await sh(manager, lease, "stat -c %U / /etc /usr/bin; ls /etc/cage-x 2>&1 | wc -l; ls /")
    assert lines[:3] == [b"root", b"root", b"root"]
    assert not any(line == b"cage-x" for line in lines)
    assert (await sh(manager, lease, "test -d /workspace/.cage-state -a ! -L /workspace/.cage-state"))[1] == 0
    with pytest.raises(SandboxError, match="symlink"):  # a destination through a link is refused
        await manager.backend.put_files(lease.ref, "/workspace/bin", [FileEntry(path="evil", content=b"")])
    await manager.release(lease)


async def test_prepare_file_step_through_a_link_is_refused(
    make_manager: Any, tmp_path: Path, docker_engine: docker.DockerClient
) -> None:
    manager = make_manager()
    req = request(tmp_path, spec(lifecycle="longrunning"))
    first = await manager.acquire(req)
    await sh(manager, first, "rm -rf /workspace/cfg; ln -s /etc /workspace/cfg")
    await manager.release(first)
    steps = [{"action": "file", "path": "cfg/settings.json", "content": "{}"}]
    with pytest.raises(WorkspaceError, match="resolves outside the workspace"):
        await manager.acquire(req.model_copy(update={"spec": spec(lifecycle="longrunning", prepare=steps)}))
    for container in docker_engine.containers.list(filters={"label": f"cage.owner={req.owner}"}):
        assert container.exec_run("ls /etc/settings.json").exit_code != 0


def test_files_tar_refuses_dot_dot() -> None:
    """L3: `..` exactly used to pass the `../` prefix check."""
    for bad in ("..", "../x", "/..", "a/../.."):
        with pytest.raises(ValueError, match="below the destination"):
            files_tar([FileEntry(path=bad, content=b"")])
