"""Burst bench: cold boxes started together, against as many `docker run`s started together.

Eight CI jobs starting on one machine, or eight sessions opened at once, each want a cold isolated
box. Every isolated box makes the shared egress proxy rewrite its configuration, one holder of the
proxy's lock at a time (`orchestrator/sandbox/docker/proxylock.py`); boxes that wait for the lock
together share a rewrite. Per round, `--boxes` acquires (one manager, as one server) each up to the
first output line of `echo` in its box, against `--boxes` `docker run --rm` of the same image
printing the same line, all started at once (the engine's floor for that many boxes on this
machine). Prints the medians over `--rounds` of the time until the last box answered, the per-box
median and maximum, the ratio, and how many times squid reconfigured per round (its log's
"Reconfiguring Squid Cache" lines, `proxy.RECONFIGURING`).

Usage: `.venv/bin/python bench/burst.py [--boxes 8] [--rounds 5] [--networks]` (`--networks`:
boxes on networks of their own, `CAGE_NAMESPACE_EGRESS=false`, as a Cage process that cannot enter
namespaces gets them). Everything it creates is labelled `cage.bench=<uuid>` and removed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import docker
from sandbox import (
    BENCH_LABEL,
    bench_image,
    docker_run,
    first_line_of_exec,
    first_line_of_process,
    fixed_images,
)

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.logs import configure_logging
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.docker.proxy import RECONFIGURING
from orchestrator.sandbox.manager import SandboxLease, SandboxManager, SandboxRequest
from orchestrator.settings import Settings


async def together(count: int, one: Callable[[int], Awaitable[float]]) -> tuple[float, list[float]]:
    """Start `one(0)` ... `one(count - 1)` at once: seconds until the last returned, and what each
    returned (its own seconds to its first line)."""
    each: list[float] = []

    async def run(index: int) -> None:
        each.append(await one(index))

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for index in range(count):
            tg.start_soon(run, index)
    return time.perf_counter() - started, each


def request(workspace: Path, spec: SandboxSpec, name: str) -> SandboxRequest:
    return SandboxRequest(owner=name, assistant_id=f"bench.{name}", assistant_dir=workspace, spec=spec)


async def cold_round(manager: SandboxManager, requests: list[SandboxRequest]) -> tuple[float, list[float]]:
    """`together` of a cold acquire and its first line for each of `requests`; the boxes released after."""
    leases: list[SandboxLease] = []

    async def cold(index: int) -> float:
        started = time.perf_counter()
        lease = await manager.acquire(requests[index])
        leases.append(lease)
        await first_line_of_exec(manager, lease)
        return time.perf_counter() - started

    try:
        return await together(len(requests), cold)
    finally:
        for lease in leases:
            await manager.release(lease)


def reconfigures(client: docker.DockerClient, proxy: str) -> int:
    said: bytes = client.api.logs(proxy, stdout=False, stderr=True)
    return said.count(RECONFIGURING)


async def main(boxes: int, rounds: int, networks: bool) -> None:
    configure_logging("WARNING")
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    client = docker.from_env()
    run_id = uuid.uuid4().hex[:12]
    labels = {BENCH_LABEL: run_id}
    settings = Settings(isolated_networks=True, namespace_egress=not networks)
    tag = bench_image(client, settings.base_image)
    manager = SandboxManager(DockerBackend(settings), fixed_images(tag), settings, extra_labels=labels)
    spec = SandboxSpec.model_validate(
        {"version": "2.0", "runner": {"name": "claude"}, "computer": {"network": "bridge"}}
    )
    raw_run = docker_run(run_id, tag)
    cage_last, cage_each, raw_last, raw_each, rewrites = [], [], [], [], []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            workspace = Path(tmp)
            first = await manager.acquire(request(workspace, spec, "warm"))  # the proxy up, caches warm
            await manager.release(first)
            await first_line_of_process(raw_run)
            for round_ in range(rounds):
                before = reconfigures(client, settings.egress_container)
                names = [f"r{round_}b{index}" for index in range(boxes)]
                last, each = await cold_round(manager, [request(workspace, spec, name) for name in names])
                rewrites.append(reconfigures(client, settings.egress_container) - before)
                cage_last.append(last)
                cage_each.extend(each)
                last, each = await together(boxes, lambda _: first_line_of_process(raw_run))
                raw_last.append(last)
                raw_each.extend(each)
    finally:
        for ref in await manager.backend.find(labels):
            await manager.backend.remove(ref, force=True)
        for volume in client.volumes.list(filters={"label": f"{BENCH_LABEL}={run_id}"}):
            volume.remove(force=True)
        client.close()
    mode = "networks of their own" if networks else "no interface where this process can serve them"
    print(f"{boxes} cold boxes at once, {rounds} rounds ({mode}); medians:")
    floor = statistics.median(raw_last)
    rows = (("cage acquire + exec", cage_last, cage_each), ("docker run --rm", raw_last, raw_each))
    for name, lasts, per_box in rows:
        whole = statistics.median(lasts)
        print(
            f"  {name:<22} last box {whole * 1000:7.0f} ms  ({whole / floor:4.2f}x)"
            f"   each: median {statistics.median(per_box) * 1000:6.0f} ms, max {max(per_box) * 1000:6.0f} ms"
        )
    median = statistics.median(rewrites)
    print(f"  squid reconfigured {median:g} times a round for {boxes} boxes (rounds: {rewrites})")
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--boxes", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--networks", action="store_true", help="boxes on networks of their own")
    args = parser.parse_args()
    anyio.run(main, args.boxes, args.rounds, args.networks)
    sys.exit(0)
