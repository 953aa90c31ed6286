"""Warm pool bench: a claim from the pool vs a cold acquire vs `docker run --rm`, in one run.

* warm claim: `SandboxManager.acquire` of a `oneshot` box whose pool holds one (the claim), and the
  same up to the first stdout line of `echo` in it;
* cold acquire: the same request with the pool off (create, start, network), up to the first line;
* `docker run --rm` of the same image printing the same line (the engine's floor);
* where the cold time goes: the median of every backend call a cold acquire makes.

Before each claim and before each cold acquire the bench waits until the background refill has
put a box back (refills are not measured, and never run during a cold acquire, which they would
slow down). Prints medians, p95 and the ratios, and the load average at start and end. Everything
it makes is labelled `cage.bench=<uuid>` and removed at the end. Usage:
`.venv/bin/python bench/pool.py [--runs 20]`.
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

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
from orchestrator.errors import SandboxError
from orchestrator.logs import configure_logging
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.manager import SandboxManager, SandboxRequest
from orchestrator.sandbox.pool import PoolKey, WarmPool
from orchestrator.settings import Settings
from orchestrator.spawn import Work

WAIT_REFILL = 60.0


class TimedEgress:
    """The backend's egress helper with its coroutine calls timed (a network's attach, a box's
    configuration, are part of a cold create)."""

    def __init__(self, inner: Any, times: dict[str, list[float]]) -> None:
        self._inner = inner
        self._times = times

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not inspect.iscoroutinefunction(value) or name.startswith("_"):
            return value

        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await value(*args, **kwargs)
            finally:
                self._times[f"egress.{name}"].append(time.perf_counter() - started)

        return timed


def timed_backend(backend: DockerBackend, times: dict[str, list[float]]) -> DockerBackend:
    """`backend` with each public coroutine method recording its duration in `times`."""
    for name in ("find", "create", "start", "ensure_volume", "list_volumes", "exec", "remove", "unpause"):
        inner = getattr(backend, name)

        def wrap(fn: Callable[..., Coroutine[Any, Any, Any]], label: str) -> Callable[..., Any]:
            async def timed(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    return await fn(*args, **kwargs)
                finally:
                    times[label].append(time.perf_counter() - started)

            return timed

        setattr(backend, name, wrap(inner, name))
    backend.egress = TimedEgress(backend.egress, times)  # type: ignore[assignment]
    return backend


async def refilled(pool: WarmPool, key: PoolKey) -> None:
    """Wait until the pool holds a free box of `key` again (the background refill is done)."""
    with anyio.move_on_after(WAIT_REFILL):
        while not pool.free(key):  # noqa: ASYNC110 - the refill runs in the task group
            await anyio.sleep(0.05)
    if not pool.free(key):  # a refill gave up (the engine could not pause): once more
        pool.refill(key, 1)
        with anyio.fail_after(WAIT_REFILL):
            while not pool.free(key):  # noqa: ASYNC110 - as above
                await anyio.sleep(0.05)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def ms(value: float) -> str:
    return f"{value * 1000:8.1f} ms"


async def main(runs: int, shared_network: bool) -> None:
    configure_logging("WARNING")
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    client = docker.from_env()
    run_id = uuid.uuid4().hex[:12]
    labels = {BENCH_LABEL: run_id}
    settings = Settings(isolated_networks=not shared_network)
    tag = bench_image(client, settings.base_image)
    times: dict[str, list[float]] = defaultdict(list)
    cold_manager = SandboxManager(
        timed_backend(DockerBackend(settings), times), fixed_images(tag), settings, extra_labels=labels
    )
    warm_manager = SandboxManager(DockerBackend(settings), fixed_images(tag), settings, extra_labels=labels)
    raw_run = docker_run(run_id, tag)
    claim, claim_line, cold, cold_line, raw = [], [], [], [], []
    misses = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            plain = SandboxSpec.model_validate({"version": "2.0", "runner": {"name": "claude"}})
            pooled = SandboxSpec.model_validate(
                {"version": "2.0", "runner": {"name": "claude"}, "pool": {"size": 1}}
            )
            cold_req = SandboxRequest(
                owner="bench", assistant_id="bench.cold", assistant_dir=Path(tmp), spec=plain
            )
            warm_req = SandboxRequest(
                owner="bench", assistant_id="bench.pool", assistant_dir=Path(tmp), spec=pooled
            )
            async with anyio.create_task_group() as tg:

                def spawn(work: Work) -> None:
                    tg.start_soon(work)

                pool = warm_manager.start_pool(spawn)
                assert pool is not None
                first = await warm_manager.acquire(warm_req)  # cold: fills the pool behind it
                await warm_manager.release(first)
                key = PoolKey(
                    owner="bench",
                    assistant_id="bench.pool",
                    workspace_id="default",
                    shared_workspace=False,
                    config_hash=first.config_hash,
                )
                await first_line_of_process(raw_run)  # warm the engine's image and network caches once
                for _ in range(runs):
                    await refilled(pool, key)
                    started = time.perf_counter()
                    lease = await warm_manager.acquire(warm_req)
                    took = time.perf_counter() - started
                    await first_line_of_exec(warm_manager, lease)
                    if lease.pooled:
                        claim.append(took)
                        claim_line.append(time.perf_counter() - started)
                    else:  # the pooled box was gone (removed behind the pool's back): not a claim
                        misses += 1
                    await warm_manager.release(lease)
                    await refilled(pool, key)  # the refill that release started is done

                    started = time.perf_counter()
                    lease = await cold_manager.acquire(cold_req)
                    took = time.perf_counter() - started
                    try:
                        await first_line_of_exec(cold_manager, lease)
                    except SandboxError:  # removed behind our back (another tool on the engine)
                        misses += 1
                    else:
                        cold.append(took)
                        cold_line.append(time.perf_counter() - started)
                    await cold_manager.release(lease)

                    raw.append(await first_line_of_process(raw_run))
                await pool.close()
                tg.cancel_scope.cancel()
    finally:  # through the backend: a box's network and its place in the proxy go with it
        for ref in await warm_manager.backend.find(labels):
            await warm_manager.backend.remove(ref, force=True)
        for volume in client.volumes.list(filters={"label": f"{BENCH_LABEL}={run_id}"}):
            volume.remove(force=True)
        client.close()
    floor = statistics.median(raw)
    print(
        f"warm pool bench ({runs} runs of each, image {tag}, isolated networks {settings.isolated_networks})"
    )
    if misses:
        print(f"{misses} samples found their box removed behind the bench's back (not counted)")
    print(f"{'what':<34}{'median':>12}{'p95':>12}{'vs docker run':>15}")
    rows = [
        ("warm claim (acquire)", claim),
        ("warm claim to first output", claim_line),
        ("cold acquire", cold),
        ("cold acquire to first output", cold_line),
        ("docker run --rm, first output", raw),
    ]
    for name, values in rows:
        med = statistics.median(values)
        print(f"{name:<34}{ms(med):>12}{ms(p95(values)):>12}{med / floor:>14.2f}x")
    print("where a cold acquire's time goes (median per call, calls per acquire):")
    for name, values in sorted(times.items(), key=lambda kv: -statistics.median(kv[1])):
        print(f"  {name:<30}{ms(statistics.median(values)):>12}  x{len(values) / runs:.1f}")
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--shared-network",
        action="store_true",
        help="boxes on the engine's shared bridge, as `docker run` (CAGE_ISOLATED_NETWORKS=false)",
    )
    args = parser.parse_args()
    anyio.run(main, args.runs, args.shared_network)
    sys.exit(0)
