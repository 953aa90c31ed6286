"""KubernetesBackend against a real cluster: the contract the Docker backend passes
(tests/integration/sandbox/test_docker_backend.py), with the pod semantics of stop/start."""

from __future__ import annotations

import signal

import anyio
import pytest

from orchestrator.errors import SandboxError, SandboxNotFound
from orchestrator.sandbox.backend import ExecItem, ExecSpec, FileEntry, SandboxRef, SandboxState
from orchestrator.sandbox.kubernetes.backend import KubernetesBackend
from orchestrator.sandbox.kubernetes.manifests import pod_name


async def run(
    backend: KubernetesBackend, box: SandboxRef, *argv: str, **kw: object
) -> tuple[list[ExecItem], int, bytes]:
    async with await backend.exec(box, ExecSpec(argv=argv, **kw)) as handle:  # type: ignore[arg-type]
        lines = [item async for item in handle]
        return lines, await handle.wait(), handle.stderr


async def test_exec_lines_stderr_env_workdir_exit_code(backend: KubernetesBackend, box: SandboxRef) -> None:
    script = 'echo one; echo "$GREETING"; pwd; echo oops >&2; id -u; exit 3'
    lines, code, stderr = await run(backend, box, "sh", "-c", script, env={"GREETING": "hi"}, workdir="/tmp")
    assert lines == [b"one", b"hi", b"/tmp", b"1000"]
    assert code == 3 and stderr == b"oops\n"


async def test_stdin_none_bytes_and_pipe(backend: KubernetesBackend, box: SandboxRef) -> None:
    assert (await run(backend, box, "cat"))[:2] == ([], 0)
    assert (await run(backend, box, "cat", stdin=b"a\nb\n"))[:2] == ([b"a", b"b"], 0)
    async with await backend.exec(box, ExecSpec(argv=("cat",), stdin="pipe")) as handle:
        await handle.write_stdin(b"first\n")
        await handle.write_stdin(b"second")
        await handle.close_stdin()
        assert [item async for item in handle] == [b"first", b"second"]
        assert await handle.wait() == 0


async def test_cancelling_an_exec_kills_the_whole_tree(backend: KubernetesBackend, box: SandboxRef) -> None:
    marker = "4321"
    spec = ExecSpec(
        argv=("sh", "-c", f"(sleep {marker}) & sleep {marker}; wait"), stdin="pipe", grace_seconds=1
    )
    handle = await backend.exec(box, spec)

    async def sleepers() -> int:
        return sum(p.argv[-1:] == (marker,) for p in await backend.list_processes(box))

    with anyio.fail_after(30):
        while await sleepers() < 2:  # noqa: ASYNC110 - the process table has no event: poll
            await anyio.sleep(0.1)
    await handle.aclose()
    await handle.aclose()  # idempotent
    assert await sleepers() == 0


async def test_signal_reaches_the_process_group(backend: KubernetesBackend, box: SandboxRef) -> None:
    script = "trap 'echo got-int; exit 7' INT; echo ready; while :; do sleep 0.05; done"
    async with await backend.exec(box, ExecSpec(argv=("sh", "-c", script))) as handle:
        items = aiter(handle)
        assert await anext(items) == b"ready"
        await handle.signal(signal.SIGINT)
        assert [item async for item in items] == [b"got-int"]
        assert await handle.wait() == 7


async def test_put_and_get_files(backend: KubernetesBackend, box: SandboxRef) -> None:
    files = [FileEntry(path="deep/dir/f.txt", content=b"payload", mode=0o600, uid=1000, gid=1000)]
    await backend.put_files(box, "/workspace", files)
    assert await backend.get_file(box, "/workspace/deep/dir/f.txt") == b"payload"
    lines, _, _ = await run(backend, box, "stat", "-c", "%u %a", "/workspace/deep/dir/f.txt")
    assert lines == [b"1000 600"]
    await run(backend, box, "ln", "-s", "/etc", "/workspace/link")
    with pytest.raises(SandboxError, match="symlink"):
        await backend.put_files(box, "/workspace/link", files)
    with pytest.raises(SandboxNotFound):
        await backend.get_file(box, "/workspace/absent")


async def test_root_execs_are_refused(backend: KubernetesBackend, box: SandboxRef) -> None:
    with pytest.raises(SandboxError, match="non-root"):
        await backend.exec(box, ExecSpec(argv=("id",), user="root"))


async def test_labels_find_inspect_stop_start_remove(
    backend: KubernetesBackend, box: SandboxRef, run_labels: dict[str, str]
) -> None:
    info = await backend.inspect(box.id)
    assert info.ref.status is SandboxState.RUNNING and info.user == "1000" and info.started_at is not None
    assert info.ref.name == box.name and info.ref.labels["cage.test-run"] == run_labels["cage.test-run"]
    assert [r.id for r in await backend.find(run_labels)] == [box.id]
    assert await backend.find({**run_labels, "cage.owner": "nobody"}) == []
    assert [v.name for v in await backend.list_volumes(run_labels)] == [f"{box.name}-ws"]
    assert await backend.list_volumes(run_labels, unused=True) == []
    await backend.stop(box, timeout=1)  # a stopped pod is gone; its workspace PVC stays
    with pytest.raises(SandboxNotFound):
        await backend.inspect(box.id)
    await backend.start(box)  # re-created from the manifest this process made
    assert (await backend.inspect(box.id)).ref.status is SandboxState.RUNNING
    await backend.remove(box, force=True)
    await backend.remove(box, force=True)  # already gone: not an error
    assert pod_name(box.name) not in await backend.sweep_networks()  # remove took its policy along
