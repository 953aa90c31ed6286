"""KubernetesBackend's exec, stdin, signal, cancel and file paths over a real websocket (the local
pods/exec stand-in in `exec_server.py`, real processes)."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from orchestrator.errors import SandboxError, SandboxNotFound
from orchestrator.sandbox.backend import ExecItem, ExecSpec, FileEntry, SandboxRef
from orchestrator.sandbox.kubernetes.backend import KubernetesBackend
from orchestrator.settings import Settings
from tests.unit.sandbox.kubernetes.exec_server import exec_server

BOX = SandboxRef(id="cage-box", name="cage-box")


@pytest.fixture
def asyncio_backend() -> str:
    return "asyncio"  # aiohttp (the Kubernetes client's transport) needs asyncio


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[KubernetesBackend]:
    async with exec_server(tmp_path) as kubeconfig:
        made = KubernetesBackend(Settings(data_dir=tmp_path / "cage", k8s_kubeconfig=kubeconfig))
        try:
            yield made
        finally:
            await made.aclose()


async def run(backend: KubernetesBackend, *argv: str, **kw: object) -> tuple[list[ExecItem], int, bytes]:
    async with await backend.exec(BOX, ExecSpec(argv=argv, **kw)) as handle:  # type: ignore[arg-type]
        lines = [item async for item in handle]
        return lines, await handle.wait(), handle.stderr


async def test_lines_stderr_env_workdir_and_exit_code(backend: KubernetesBackend) -> None:
    script = 'echo one; echo "$GREETING"; pwd; echo oops >&2; exit 3'
    lines, code, stderr = await run(backend, "sh", "-c", script, env={"GREETING": "hi"}, workdir="/tmp")
    assert (lines, code, stderr) == ([b"one", b"hi", b"/tmp"], 3, b"oops\n")


async def test_stdin_none_bytes_and_pipe(backend: KubernetesBackend) -> None:
    assert (await run(backend, "cat"))[:2] == ([], 0)
    assert (await run(backend, "cat", stdin=b"a\nb\n"))[:2] == ([b"a", b"b"], 0)
    async with await backend.exec(BOX, ExecSpec(argv=("cat",), stdin="pipe")) as handle:
        await handle.write_stdin(b"first\n")
        await handle.write_stdin(b"second")
        await handle.close_stdin()
        assert [item async for item in handle] == [b"first", b"second"]
        assert await handle.wait() == 0


@pytest.mark.serial  # passes alone in 3 s; hung to the 300 s timeout in both parallel full runs
async def test_signal_reaches_the_process_group(backend: KubernetesBackend) -> None:
    script = "trap 'echo got-int; exit 7' INT; echo ready; while :; do sleep 0.05; done"
    async with await backend.exec(BOX, ExecSpec(argv=("sh", "-c", script))) as handle:
        items = aiter(handle)
        assert await anext(items) == b"ready"
        await handle.signal(signal.SIGINT)
        assert [item async for item in items] == [b"got-int"]
        assert await handle.wait() == 7


async def test_closing_a_running_exec_kills_its_whole_group(
    backend: KubernetesBackend, tmp_path: Path
) -> None:
    marker = tmp_path / "alive"
    script = f"(while :; do touch {marker}; sleep 0.05; done) & echo started; wait"
    handle = await backend.exec(BOX, ExecSpec(argv=("sh", "-c", script), stdin="pipe", grace_seconds=1))
    assert await anext(aiter(handle)) == b"started"
    pgid = handle.pgid
    assert pgid is not None
    await handle.aclose()
    await handle.aclose()  # idempotent
    procs = await backend.list_processes(BOX)
    # a killed process can linger as a zombie until it is reaped: no argv, it runs nothing
    assert [p for p in procs if p.pgid == pgid and p.argv] == []
    marker.unlink(missing_ok=True)
    await anyio.sleep(0.3)  # the background loop, had it survived, would have touched it again
    assert not marker.exists()


async def test_put_files_then_get_file_and_the_symlink_refusal(
    backend: KubernetesBackend, tmp_path: Path
) -> None:
    import os

    me = os.getuid(), os.getgid()
    files = [FileEntry(path="deep/dir/f.txt", content=b"payload", mode=0o600, uid=me[0], gid=me[1])]
    await backend.put_files(BOX, str(tmp_path / "ws"), files)
    assert (tmp_path / "ws/deep/dir/f.txt").read_bytes() == b"payload"
    assert (tmp_path / "ws/deep/dir/f.txt").stat().st_mode & 0o777 == 0o600
    assert await backend.get_file(BOX, str(tmp_path / "ws/deep/dir/f.txt")) == b"payload"
    (tmp_path / "link").symlink_to(tmp_path / "ws")
    with pytest.raises(SandboxError, match="symlink"):
        await backend.put_files(BOX, str(tmp_path / "link"), files)
    with pytest.raises(SandboxNotFound):
        await backend.get_file(BOX, str(tmp_path / "absent"))


async def test_an_execs_files_are_written_before_it_starts(
    backend: KubernetesBackend, tmp_path: Path
) -> None:
    import os

    me = os.getuid(), os.getgid()
    files = (FileEntry(path="in/f.txt", content=b"first", uid=me[0], gid=me[1]),)
    spec = ExecSpec(argv=("cat", str(tmp_path / "ws/in/f.txt")), files=files, files_dir=str(tmp_path / "ws"))
    async with await backend.exec(BOX, spec) as handle:
        assert [line async for line in handle] == [b"first"]
        assert await handle.wait() == 0
    (tmp_path / "link").symlink_to(tmp_path / "ws")
    refused = spec.model_copy(
        update={"argv": ("touch", str(tmp_path / "ran")), "files_dir": str(tmp_path / "link")}
    )
    with pytest.raises(SandboxError, match="symlink"):
        await backend.exec(BOX, refused)
    assert not (tmp_path / "ran").exists()


async def test_root_execs_are_refused_before_any_stream(backend: KubernetesBackend) -> None:
    with pytest.raises(SandboxError, match="non-root"):
        await backend.exec(BOX, ExecSpec(argv=("id",), user="root"))
