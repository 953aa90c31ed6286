"""L4 / issue 11 item 2: files Cage writes into a box never follow a symlink the agent planted.

The agent replaces `attachments/` with a link to `/etc` (and `.cage-state` with a link to `/`),
then Cage writes the user's next attachment, a prepare `file` step and runner files. Before,
the engine extracted them as root through the links. Now they are written by the sandbox user
with tar, which replaces the links; the assertions look at the container's real `/etc` and `/`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import docker
import pytest

from orchestrator.errors import SandboxError, WorkspaceError
from orchestrator.pipeline.contract import Attachment
from orchestrator.pipeline.stages.sandbox import write_attachments
from orchestrator.sandbox.backend import ExecSpec, FileEntry
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


async def _run_with_files(
    manager: Any, lease: Any, script: str, files: list[FileEntry], dest: str = "/workspace", **kw: Any
) -> tuple[list[bytes], int]:
    """`script` started by an exec that writes `files` first (`ExecSpec.files`)."""
    spec = ExecSpec(argv=("sh", "-c", script), files=tuple(files), files_dir=dest, **kw)
    async with await manager.exec(lease, spec) as handle:
        lines = [item for item in [i async for i in handle] if isinstance(item, bytes)]
        return lines, await handle.wait()


async def test_files_an_exec_writes_first_follow_no_planted_link(make_manager: Any, tmp_path: Path) -> None:
    """The runner's files ride in its CLI's exec: the same `.cage-state -> /` trick, the same
    refusal of a destination through a link, and the command never runs when they fail."""
    manager = make_manager()
    lease = await manager.acquire(request(tmp_path, spec(lifecycle="session"), session_id="c4"))
    await sh(manager, lease, "ln -s / /workspace/.cage-state; ln -s /usr/bin /workspace/bin")
    entry = FileEntry(path=".cage-state/etc/cage-x", content=b"x", uid=1000, gid=1000)
    lines, code = await _run_with_files(
        manager, lease, "stat -c %U / /etc; ls /etc/cage-x 2>&1 | wc -l", [entry]
    )
    assert code == 0 and lines == [b"root", b"root", b"1"]  # `ls` said "No such file": one line
    assert (await sh(manager, lease, "test -d /workspace/.cage-state -a ! -L /workspace/.cage-state"))[1] == 0
    with pytest.raises(SandboxError, match="passes through\\) a symlink"):
        await _run_with_files(
            manager, lease, "touch /tmp/ran", [FileEntry(path="evil", content=b"")], "/workspace/bin"
        )
    assert (await sh(manager, lease, "test -e /tmp/ran"))[1] == 1  # the command never started
    await manager.release(lease)


async def test_files_an_exec_writes_first_are_there_and_their_tar_is_not(
    make_manager: Any, tmp_path: Path, docker_engine: docker.DockerClient
) -> None:
    manager = make_manager()
    lease = await manager.acquire(request(tmp_path, spec(lifecycle="session"), session_id="c5"))
    files = [
        FileEntry(
            path=".cage-state/runner/settings.json", content=b'{"a": 1}', mode=0o600, uid=1000, gid=1000
        ),
        FileEntry(path="prompt.md", content="héllo\n".encode(), uid=1000, gid=1000),
    ]
    script = (
        "stat -c '%u:%g %a' .cage-state/runner/settings.json; cat .cage-state/runner/settings.json; echo; "
        "cat prompt.md; env | grep -c CAGE_PUT_FILES; tr '\\000' '\\n' < /proc/$$/environ | grep -c CAGE_PUT; "
        "head -c 5"
    )

    def execs_since(started: float) -> int:
        """The engine's `exec_create` events for the box since `started` (its clock is this
        host's; the API takes fractions of a second as a string)."""
        found = docker_engine.api.events(
            since=f"{started:.6f}",
            until=f"{time.time():.6f}",
            decode=True,
            filters={"container": lease.ref.id, "event": "exec_create"},
        )
        return sum(1 for _ in found)

    started = time.time()
    lines, code = await _run_with_files(manager, lease, script, files, stdin=b"stdin")
    assert code == 0
    assert lines == [b"1000:1000 600", b'{"a": 1}', "héllo".encode(), b"0", b"0", b"stdin"]
    assert execs_since(started) == 1  # one exec wrote the files and became the command
    # a tar too large for a variable goes in an exec of its own first: the same result
    big = FileEntry(path="big.txt", content=b"x" * 200_000, uid=1000, gid=1000)
    started = time.time()
    lines, code = await _run_with_files(manager, lease, "wc -c < big.txt", [big])
    assert (lines, code) == ([b"200000"], 0)
    assert execs_since(started) == 2
    await manager.release(lease)
