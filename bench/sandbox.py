"""Sandbox overhead bench: Cage's manager against the raw docker CLI, measured in one run.

* warm exec: time to the first stdout line of `echo` in an already-running box, through
  `SandboxManager.exec` vs `docker exec`;
* cold acquire: a fresh `oneshot` box up to the first output line of `echo` (acquire + exec) vs
  `docker run --rm` (issue 14's target: at most 1.3x), and, when boxes get a network of their own
  (`Settings.isolated_networks`, the default), vs the engine's floor for that same isolation:
  `docker network create --internal` then `docker run --rm --network` on it, to the same first line;
  beside them `docker run --rm --network none`, a box with no network at all: the floor of a design
  whose boxes reach the proxy through something other than a network (`docs/performance.md`).

Prints the medians and the ratios. Everything it creates is labelled `cage.bench=<uuid>` and
removed at the end. Usage: `.venv/bin/python bench/sandbox.py [--runs 20]`.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio
import docker
import docker.errors

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' fakes

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.logs import configure_logging
from orchestrator.sandbox.backend import ExecSpec
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.manager import SandboxLease, SandboxManager, SandboxRequest
from orchestrator.settings import Settings
from tests.unit.sandbox.fakes import FakeImageBuilder

BENCH_LABEL = "cage.bench"
DOCKERFILE = """\
FROM {base}
RUN apt-get update && apt-get install -y --no-install-recommends procps coreutils util-linux \\
    && rm -rf /var/lib/apt/lists/* && useradd -u 1000 -m -s /bin/bash sandbox
WORKDIR /workspace
"""


def fixed_images(tag: str) -> FakeImageBuilder:
    """An ImageBuilder returning the bench image for every runner (the tests' fake, on `tag`)."""
    return FakeImageBuilder(tag=tag, image_hash=hashlib.sha256(tag.encode()).hexdigest())


def docker_run(run_id: str, tag: str, *options: str) -> list[str]:
    """`docker run --rm [options]` of the bench image printing one line: the engine's floor for a
    cold box (`--network none`: one with a network namespace and no interface in it)."""
    label = f"{BENCH_LABEL}={run_id}"
    return ["docker", "run", "--rm", "--label", label, *options, "-u", "sandbox", tag, "echo", "hi"]


def isolated_docker_run(run_id: str, tag: str, network: str) -> list[list[str]]:
    """The engine's floor for a box on a network of its own: create an internal network, then
    `docker run --rm` on it (the network is removed after the timing)."""
    label = f"{BENCH_LABEL}={run_id}"
    return [
        ["docker", "network", "create", "--internal", "--label", label, network],
        docker_run(run_id, tag, "--network", network),
    ]


async def first_line_after(steps: list[list[str]]) -> float:
    """Seconds from running `steps[:-1]` one after the other to the first stdout line of `steps[-1]`."""
    started = time.perf_counter()
    for argv in steps[:-1]:
        await anyio.run_process(argv)
    await first_line_of_process(steps[-1])
    return time.perf_counter() - started


def bench_image(client: docker.DockerClient, base: str) -> str:
    dockerfile = DOCKERFILE.format(base=base)
    tag = f"cage-test/sandbox:{hashlib.sha256(dockerfile.encode()).hexdigest()[:12]}"
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, forcerm=True)
    return tag


async def first_line_of_process(argv: list[str]) -> float:
    """Seconds from spawning `argv` to its first stdout line."""
    started = time.perf_counter()
    async with await anyio.open_process(argv) as proc:
        assert proc.stdout is not None
        buf = b""
        async for chunk in proc.stdout:
            buf += chunk
            if b"\n" in buf:
                break
        elapsed = time.perf_counter() - started
        await proc.wait()
    return elapsed


async def first_line_of_exec(manager: SandboxManager, lease: SandboxLease) -> float:
    started = time.perf_counter()
    async with await manager.exec(lease, ExecSpec(argv=("echo", "hi"))) as handle:
        async for _ in handle:
            elapsed = time.perf_counter() - started
            break
        await handle.wait()
    return elapsed


TARGET_COLD_RATIO = 1.3
"""Issue 14, target 3: a cold acquire takes at most 1.3x `docker run`."""


def report(
    name: str, ours: list[float], raw: list[float], raw_name: str, target: float | None = None
) -> bool:
    a, b = statistics.median(ours), statistics.median(raw)
    ours_ms, raw_ms = f"{a * 1000:8.1f} ms", f"{b * 1000:8.1f} ms"
    met = target is None or a / b <= target
    verdict = "" if target is None else f"   (target <= {target}: {'met' if met else 'NOT MET'})"
    print(f"{name:<14} cage median {ours_ms}   {raw_name} median {raw_ms}   ratio {a / b:5.2f}{verdict}")
    return met


async def main(runs: int) -> bool:
    configure_logging("WARNING")
    client = docker.from_env()
    run_id = uuid.uuid4().hex[:12]
    labels = {BENCH_LABEL: run_id}
    settings = Settings()
    tag = bench_image(client, settings.base_image)
    backend = DockerBackend(settings)
    manager = SandboxManager(backend, fixed_images(tag), settings, extra_labels=labels)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            spec = SandboxSpec.model_validate(
                {"version": "2.0", "runner": {"name": "claude"}, "lifecycle": "session"}
            )
            req = SandboxRequest(
                owner="bench",
                assistant_id="bench.sandbox",
                assistant_dir=Path(tmp),
                session_id=run_id,
                spec=spec,
            )
            lease = await manager.acquire(req)
            raw_exec = ["docker", "exec", "-u", "sandbox", lease.ref.id, "echo", "hi"]
            await first_line_of_exec(manager, lease)  # warm-up both paths once
            await first_line_of_process(raw_exec)
            ours_warm, raw_warm = [], []
            for _ in range(runs):
                ours_warm.append(await first_line_of_exec(manager, lease))
                raw_warm.append(await first_line_of_process(raw_exec))
            await manager.release(lease)

            oneshot = SandboxSpec.model_validate({"version": "2.0", "runner": {"name": "claude"}})
            cold_req = SandboxRequest(
                owner="bench", assistant_id="bench.sandbox", assistant_dir=Path(tmp), spec=oneshot
            )
            raw_run = docker_run(run_id, tag)
            ours_cold, raw_cold, floor_cold, bare_cold = [], [], [], []
            for i in range(max(3, runs // 2)):
                started = time.perf_counter()
                cold = await manager.acquire(cold_req)
                await first_line_of_exec(manager, cold)
                ours_cold.append(time.perf_counter() - started)
                await manager.release(cold)
                raw_cold.append(await first_line_of_process(raw_run))
                bare_cold.append(await first_line_of_process(docker_run(run_id, tag, "--network", "none")))
                if settings.isolated_networks:
                    network = f"cage-bench-{run_id}-{i}"
                    floor_cold.append(await first_line_after(isolated_docker_run(run_id, tag, network)))
                    await anyio.run_process(["docker", "network", "rm", network])
    finally:  # through the backend: a box's network and its place in the proxy go with it
        for ref in await backend.find(labels):
            await backend.remove(ref, force=True)
        for volume in client.volumes.list(filters={"label": f"{BENCH_LABEL}={run_id}"}):
            volume.remove(force=True)
        client.close()
    print(f"sandbox bench ({runs} warm runs, {len(ours_cold)} cold runs, image {tag})")
    report("warm exec", ours_warm, raw_warm, "docker exec")
    met = report("cold acquire", ours_cold, raw_cold, "docker run ", TARGET_COLD_RATIO)
    if floor_cold:
        report("cold acquire", ours_cold, floor_cold, "network + docker run")
    report("cold acquire", ours_cold, bare_cold, "docker run --network none")
    return met


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    sys.exit(0 if anyio.run(main, args.runs) else 1)
