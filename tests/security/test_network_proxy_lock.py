"""The egress proxy's configuration is rewritten one process at a time, whatever the process.

Cage processes that share an engine share its proxy, not always a directory: a CI job's `cage run`
with a data directory of its own beside `cage serve`, a replica in a container, another user. The
lock of a rewrite was a file in the data directory, so two such processes could interleave: a
render taken before the other's box existed, written after the other's, leaves that box out (it
fails closed until the next rewrite). The lock is now held in the proxy's container
(`orchestrator/sandbox/docker/proxylock.py`). Each test here holds or breaks it as another process
would, on the real engine, in both egress modes.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import docker
import pytest

from orchestrator.sandbox.docker.frames import ExecStream, hijacked
from orchestrator.sandbox.docker.proxy import FRONT_CONF, RECONFIGURING
from orchestrator.sandbox.docker.proxylock import lock_argv
from orchestrator.sandbox.manager import SandboxLease, SandboxManager
from orchestrator.settings import Settings
from tests.security import egress_rig
from tests.security.egress_rig import ALLOWED, HostServer, acquire, manager_on, probe
from tests.subprocess_env import ENGINE_VARS, subprocess_env

pytestmark = [pytest.mark.docker]
docker_engine, host_server, proxy_name, egress_settings, egress_manager = egress_rig.FIXTURES


@pytest.fixture
async def other_manager(egress_settings: Settings, tmp_path: Path) -> AsyncIterator[SandboxManager]:
    """A second Cage process's manager: the same engine and proxy, a data directory of its own."""
    async with manager_on(
        egress_settings.model_copy(update={"data_dir": tmp_path / "other-cage"})
    ) as manager:
        yield manager


def _until(stream: ExecStream, word: bytes) -> None:
    """Read the exec's (framed) output until `word` is in it (through the reader: its first bytes
    may have come with the engine's answer)."""
    said = b""
    stream.sock.settimeout(30)
    while word not in said:
        chunk = stream.reader.read1(4096)
        assert chunk, f"the exec ended before it said {word!r}: {said!r}"
        said += chunk


def _exec(engine: docker.DockerClient, proxy: str, argv: list[str]) -> tuple[str, ExecStream]:
    created = engine.api.exec_create(proxy, argv, stdin=True, stdout=True, stderr=True, user="root")
    return created["Id"], hijacked(engine.api.exec_start(created["Id"], socket=True), proxy)


HOLDER = """
import sys, time
from orchestrator.sandbox.docker.clients import api_client
from orchestrator.sandbox.docker.proxylock import config_lock
from orchestrator.settings import Settings
with config_lock(api_client(Settings()), sys.argv[1], sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)
"""
"""Another Cage process in the middle of a rewrite: it holds the proxy's lock until it is killed."""


def hold(proxy: str) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, proxy, "/tmp/unused.conf"],
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(keep=ENGINE_VARS),
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def configuration(engine: docker.DockerClient, proxy: str) -> bytes:
    result = engine.api.exec_create(proxy, ["cat", FRONT_CONF])
    return bytes(engine.api.exec_start(result["Id"]))


async def reaches(manager: SandboxManager, lease: SandboxLease, port: int, path: str) -> object:
    return (await probe(manager, lease, ["http", "a", f"http://{ALLOWED}:{port}{path}"]))["a"]


async def test_a_rewrite_waits_for_another_process_and_a_holder_that_dies_lets_go(
    egress_manager: SandboxManager,
    other_manager: SandboxManager,
    egress_settings: Settings,
    docker_engine: docker.DockerClient,
    host_server: HostServer,
    tmp_path: Path,
) -> None:
    port, proxy = host_server.port, egress_settings.egress_container
    allow = {"allow": [f"{ALLOWED}:{port}"]}
    first = await acquire(egress_manager, tmp_path / "first", allow)  # the proxy is up
    holder = await anyio.to_thread.run_sync(hold, proxy)
    before = await anyio.to_thread.run_sync(configuration, docker_engine, proxy)
    leases: list[SandboxLease] = []
    started = anyio.Event()

    async def second() -> None:
        leases.append(await acquire(other_manager, tmp_path / "second", allow))
        started.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(second)
        with anyio.move_on_after(3.0):  # a rewrite takes ~0.1 s: this one waits for the lock
            await started.wait()
        assert not started.is_set()
        assert await anyio.to_thread.run_sync(configuration, docker_engine, proxy) == before
        holder.kill()  # SIGKILL: nothing of it runs again, its connection closes with its process
        await anyio.to_thread.run_sync(holder.communicate)  # reaped, its pipe closed
        with anyio.fail_after(30):
            await started.wait()
    assert await reaches(other_manager, leases[0], port, "/second") == [200, "hello /second"]
    assert await reaches(egress_manager, first, port, "/first") == [200, "hello /first"]
    await other_manager.release(leases[0])
    await egress_manager.release(first)


async def test_a_rewrite_cut_short_leaves_the_configuration_as_it_was(
    egress_manager: SandboxManager,
    egress_settings: Settings,
    docker_engine: docker.DockerClient,
    host_server: HostServer,
    tmp_path: Path,
) -> None:
    port, proxy = host_server.port, egress_settings.egress_container
    lease = await acquire(egress_manager, tmp_path, {"allow": [f"{ALLOWED}:{port}"]})
    before = await anyio.to_thread.run_sync(configuration, docker_engine, proxy)

    def cut_short() -> int:
        exec_id, stream = _exec(docker_engine, proxy, lock_argv(FRONT_CONF))
        _until(stream, b"locked")
        stream.sock.sendall(b"100000\nhttp_port 1\n")  # a writer that dies 14 bytes into 100,000
        stream.sock.shutdown(socket.SHUT_RDWR)  # what its death does to the connection
        for _ in range(300):
            info = docker_engine.api.exec_inspect(exec_id)
            if not info["Running"]:
                return int(info["ExitCode"])
            time.sleep(0.05)
        raise AssertionError("the cut-short exec never ended")

    assert await anyio.to_thread.run_sync(cut_short) != 0
    assert await anyio.to_thread.run_sync(configuration, docker_engine, proxy) == before
    assert await reaches(egress_manager, lease, port, "/after") == [200, "hello /after"]
    other = await acquire(egress_manager, tmp_path / "other", {"allow": [f"{ALLOWED}:{port}"]})
    assert await reaches(egress_manager, other, port, "/next") == [200, "hello /next"]  # the lock is free
    await egress_manager.release(other)
    await egress_manager.release(lease)


async def test_boxes_two_processes_start_at_once_all_get_their_policies(
    egress_manager: SandboxManager, other_manager: SandboxManager, host_server: HostServer, tmp_path: Path
) -> None:
    port = host_server.port
    started: list[tuple[SandboxManager, SandboxLease]] = []

    async def start(manager: SandboxManager, name: str) -> None:
        started.append((manager, await acquire(manager, tmp_path / name, {"allow": [f"{ALLOWED}:{port}"]})))

    async with anyio.create_task_group() as tg:
        for index in range(3):
            tg.start_soon(start, egress_manager, f"a{index}")
            tg.start_soon(start, other_manager, f"b{index}")
    assert len(started) == 6
    for index, (manager, lease) in enumerate(started):
        assert await reaches(manager, lease, port, f"/{index}") == [200, f"hello /{index}"]
    for manager, lease in started:
        await manager.release(lease)


def _await_flocks(engine: docker.DockerClient, proxy: str, count: int) -> None:
    """Return once `count` `flock`s are in the proxy: the lock's holder and those waiting for it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        processes = engine.api.top(proxy, ps_args="-eo pid,args").get("Processes") or []
        if sum(1 for _, args in processes if args.startswith("flock ")) >= count:
            return
        time.sleep(0.1)
    raise AssertionError(f"fewer than {count} flocks in the proxy after 60 s")


def _rewrites(engine: docker.DockerClient, proxy: str) -> int:
    """How many times squid has reconfigured, by its own log."""
    return engine.api.logs(proxy, stdout=False, stderr=True).count(RECONFIGURING)


# It counts squid's reconfigures, and a render names every box on the engine: another worker's box
# made or removed between two holders' renders rightly costs a second rewrite (seen once in CI).
@pytest.mark.serial
async def test_boxes_that_wait_for_the_lock_together_share_one_rewrite(
    egress_manager: SandboxManager,
    egress_settings: Settings,
    docker_engine: docker.DockerClient,
    host_server: HostServer,
    tmp_path: Path,
) -> None:
    """The first of them to get the lock renders every box that exists by then; the others find
    that text in the proxy, taken by squid, and write nothing. Each box still reaches what its
    policy allows."""
    port, proxy = host_server.port, egress_settings.egress_container
    allow = {"allow": [f"{ALLOWED}:{port}"]}
    first = await acquire(egress_manager, tmp_path / "first", allow)
    holder = await anyio.to_thread.run_sync(hold, proxy)
    leases: list[SandboxLease] = []

    async def start(name: str) -> None:
        leases.append(await acquire(egress_manager, tmp_path / name, allow))

    async with anyio.create_task_group() as tg:
        for index in range(3):
            tg.start_soon(start, f"box-{index}")
        # each has made its box and waits in the proxy for the lock
        await anyio.to_thread.run_sync(_await_flocks, docker_engine, proxy, 4)
        before = await anyio.to_thread.run_sync(_rewrites, docker_engine, proxy)
        holder.kill()
        await anyio.to_thread.run_sync(holder.communicate)
    assert await anyio.to_thread.run_sync(_rewrites, docker_engine, proxy) == before + 1
    for index, lease in enumerate([first, *leases]):
        assert await reaches(egress_manager, lease, port, f"/{index}") == [200, f"hello /{index}"]
        await egress_manager.release(lease)
