"""DockerBackend against a real engine: exec streams, stdin modes, signals, cancellation, files."""

from __future__ import annotations

import hashlib
import signal
import time
import uuid

import anyio
import docker
import pytest

from orchestrator.errors import SandboxNotFound, StreamLimitError
from orchestrator.sandbox.backend import (
    CreateSpec,
    ExecItem,
    ExecSpec,
    FileEntry,
    SandboxRef,
    SandboxState,
    VolumeMount,
)
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.limits import MAIN_COMMAND


async def run(
    backend: DockerBackend, box: SandboxRef, *argv: str, **kw: object
) -> tuple[list[ExecItem], int, bytes]:
    spec = ExecSpec(argv=argv, user="sandbox", **kw)
    async with await backend.exec(box, spec) as handle:
        lines = [item async for item in handle]
        code = await handle.wait()
        return lines, code, handle.stderr


async def processes(backend: DockerBackend, box: SandboxRef) -> list[str]:
    lines, _, _ = await run(backend, box, "ps", "-eo", "args")
    return [line.decode() for line in lines if isinstance(line, bytes)]


async def test_exec_lines_stderr_env_exit_code(backend: DockerBackend, box: SandboxRef) -> None:
    lines, code, stderr = await run(
        backend,
        box,
        "sh",
        "-c",
        'echo one; echo "$GREETING"; echo oops >&2; id -un; exit 3',
        env={"GREETING": "hi"},
    )
    assert lines == [b"one", b"hi", b"sandbox"]
    assert code == 3
    assert stderr == b"oops\n"


async def test_stdin_none_bytes_and_pipe(backend: DockerBackend, box: SandboxRef) -> None:
    lines, code, _ = await run(backend, box, "cat")
    assert (lines, code) == ([], 0)
    lines, code, _ = await run(backend, box, "cat", stdin=b"a\nb\n")
    assert (lines, code) == ([b"a", b"b"], 0)
    async with await backend.exec(box, ExecSpec(argv=("cat",), user="sandbox", stdin="pipe")) as handle:
        await handle.write_stdin(b"first\n")
        await handle.write_stdin(b"second")
        await handle.close_stdin()
        assert [item async for item in handle] == [b"first", b"second"]
        assert await handle.wait() == 0


async def test_fifty_megabyte_line_arrives_intact(backend: DockerBackend, box: SandboxRef) -> None:
    size = 50 * 2**20
    started = time.perf_counter()
    lines, code, _ = await run(
        backend, box, "sh", "-c", f"head -c {size} /dev/zero | tr '\\0' x; echo; echo after"
    )
    assert code == 0
    assert len(lines) == 2 and lines[1] == b"after"
    assert isinstance(lines[0], bytes) and len(lines[0]) == size
    assert hashlib.sha256(lines[0]).hexdigest() == hashlib.sha256(b"x" * size).hexdigest()
    assert time.perf_counter() - started < 20


async def test_line_over_the_cap_becomes_a_marker(box: SandboxRef, settings: object) -> None:
    from orchestrator.settings import Settings

    small = DockerBackend(Settings(max_line_bytes=1000))
    lines, code, _ = await run(
        small, box, "sh", "-c", "echo before; head -c 5000 /dev/zero | tr '\\0' y; echo; echo after"
    )
    assert code == 0
    assert lines[0] == b"before" and lines[2] == b"after"
    assert isinstance(lines[1], StreamLimitError) and lines[1].limit == 1000


async def test_cancelling_an_exec_kills_the_whole_tree(backend: DockerBackend, box: SandboxRef) -> None:
    marker = "sleep 4321"
    spec = ExecSpec(
        argv=("sh", "-c", f"({marker}) & {marker}; wait"), user="sandbox", stdin="pipe", grace_seconds=1
    )
    handle = await backend.exec(box, spec)
    await anyio.sleep(0.3)
    assert sum(marker in p for p in await processes(backend, box)) >= 2
    with anyio.move_on_after(0.3):
        async for _ in handle:
            pass
    started = time.perf_counter()
    await handle.aclose()
    await handle.aclose()  # idempotent
    assert time.perf_counter() - started < 4
    assert not [p for p in await processes(backend, box) if marker in p]


async def test_signal_reaches_the_process_group(backend: DockerBackend, box: SandboxRef) -> None:
    script = "trap 'echo got-int; exit 7' INT; echo ready; while :; do sleep 0.05; done"
    async with await backend.exec(box, ExecSpec(argv=("sh", "-c", script), user="sandbox")) as handle:
        items = aiter(handle)
        assert await anext(items) == b"ready"
        await handle.signal(signal.SIGINT)
        assert [item async for item in items] == [b"got-int"]
        assert await handle.wait() == 7


async def test_put_and_get_files_owned_by_sandbox(backend: DockerBackend, box: SandboxRef) -> None:
    await backend.put_files(
        box,
        "/workspace",
        [FileEntry(path="deep/dir/f.txt", content=b"payload", mode=0o600, uid=1000, gid=1000)],
    )
    assert await backend.get_file(box, "/workspace/deep/dir/f.txt") == b"payload"
    lines, _, _ = await run(
        backend, box, "stat", "-c", "%u %a %n", "/workspace", "/workspace/deep", "/workspace/deep/dir/f.txt"
    )
    assert lines == [
        b"1000 755 /workspace",
        b"1000 755 /workspace/deep",
        b"1000 600 /workspace/deep/dir/f.txt",
    ]
    lines, code, _ = await run(backend, box, "sh", "-c", "echo x > /workspace/mine && cat /workspace/mine")
    assert (lines, code) == ([b"x"], 0)


async def test_inspect_find_stop_remove(
    backend: DockerBackend, box: SandboxRef, test_run_labels: dict[str, str]
) -> None:
    info = await backend.inspect(box.id)
    assert info.ref.status is SandboxState.RUNNING and info.user == "sandbox"
    assert info.started_at is not None and info.usage.pids is not None and info.usage.pids >= 1
    assert box.id in [r.id for r in await backend.find(test_run_labels)]
    await backend.stop(box, timeout=1)
    assert (await backend.inspect(box.id)).ref.status is SandboxState.STOPPED
    await backend.remove(box, force=True)
    await backend.remove(box, force=True)  # already gone: not an error
    with pytest.raises(SandboxNotFound):
        await backend.inspect(box.id)


async def test_every_box_on_a_volume_finds_its_root_owned_and_writable(
    backend: DockerBackend,
    sandbox_image: str,
    test_run_labels: dict[str, str],
    docker_engine: docker.DockerClient,
) -> None:
    """The first box of the process gives the volume's root to its owner; later ones mount it
    without the engine's copy of the image's (root-owned) mount point over an empty volume, also
    after the agent emptied it; a volume removed and made again behind the backend's back is owned
    again."""
    volume = f"cage-it-{uuid.uuid4().hex[:10]}-ws"

    async def root_of_a_new_box() -> list[ExecItem]:
        ref = await backend.create(
            CreateSpec(
                image=sandbox_image,
                name=f"cage-it-{uuid.uuid4().hex[:10]}",
                command=MAIN_COMMAND,
                labels=test_run_labels,
                user="sandbox",
                workdir="/workspace",
                mounts=(VolumeMount(source=volume, target="/workspace", owner=(1000, 1000)),),
                cap_drop=("ALL",),
            )
        )
        try:
            await backend.start(ref)
            lines, code, _ = await run(
                backend, ref, "sh", "-c", "stat -c %u:%g /workspace && touch /workspace/f && rm /workspace/f"
            )
            assert code == 0, lines
            return lines
        finally:
            await backend.remove(ref, force=True)

    try:
        await backend.ensure_volume(volume, test_run_labels)
        assert await root_of_a_new_box() == [b"1000:1000"]
        assert await root_of_a_new_box() == [b"1000:1000"]  # the volume is empty again: no copy
        await backend.remove_volume(volume)
        await backend.ensure_volume(volume, test_run_labels)
        assert await root_of_a_new_box() == [b"1000:1000"]
        await anyio.sleep(1.1)  # the engine's volume times have whole seconds
        docker_engine.volumes.get(volume).remove()
        docker_engine.volumes.create(volume, labels=test_run_labels)  # root-owned, unknown here
        assert await root_of_a_new_box() == [b"1000:1000"]
    finally:
        await backend.remove_volume(volume)
