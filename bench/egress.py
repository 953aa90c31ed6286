"""Egress bench: download throughput through the egress proxy against a direct connection.

A host HTTP server serves `--mb` MiB of zeros. Three boxes of the tools image download it `--runs`
times each with Python's urllib, and the best and median throughput are reported:

- **proxied**: an isolated box (`{allow: [bench.cage.test:<port>]}`) through squid (`cage-egress`),
  the only way such a box gets out; with no interface when this process can serve one (root), so
  every byte also passes through this process's relay (`orchestrator/sandbox/docker/netns.py`);
- **proxied_network**: the same box on a network of its own (`namespace_egress` off);
- **direct**: a box on the engine's shared bridge (isolation off) straight to `host.docker.internal`.

Also reported: the time `acquire()` takes for each (on a network of its own: create the network,
join the proxy to it, reconfigure squid). Usage: `.venv/bin/python bench/egress.py [--mb 256] [--runs 5]`.
Everything it creates is labelled `cage.bench=<uuid>` and removed at the end (its proxy too).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import docker

from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.logs import configure_logging
from orchestrator.sandbox.backend import ExecSpec
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.sandbox.manager import SandboxLease, SandboxManager, SandboxRequest
from orchestrator.settings import Settings

NAME = "bench.cage.test"
CHUNK = b"\0" * 2**20
FETCH = r"""
import sys, time, urllib.request
url, proxy, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
handler = urllib.request.ProxyHandler({"http": proxy} if proxy else {})
opener = urllib.request.build_opener(handler)
for _ in range(runs):
    t = time.perf_counter(); n = 0
    with opener.open(url, timeout=120) as r:
        while block := r.read(1 << 20):
            n += len(block)
    print(n, time.perf_counter() - t, flush=True)
"""


def serve(mib: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(mib * len(CHUNK)))
            self.end_headers()
            for _ in range(mib):
                self.wfile.write(CHUNK)

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("0.0.0.0", 0), Handler)  # containers reach it on the bridge address
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def timed_acquire(manager: SandboxManager, network: Any, tmp: Path) -> tuple[SandboxLease, float]:
    spec = SandboxSpec.model_validate(
        {
            "version": "2.0",
            "runner": {"name": "yaocode"},
            "computer": {"network": network},
            "lifecycle": "oneshot",
        }
    )
    start = time.perf_counter()
    lease = await manager.acquire(
        SandboxRequest(
            owner="bench", assistant_id=f"bench.egress-{uuid.uuid4().hex[:6]}", assistant_dir=tmp, spec=spec
        )
    )
    return lease, time.perf_counter() - start


async def download(
    manager: SandboxManager, lease: SandboxLease, url: str, proxy: str, runs: int
) -> list[float]:
    argv = ("python3", "-c", FETCH, url, proxy, str(runs))
    rates: list[float] = []
    async with await manager.exec(lease, ExecSpec(argv=argv)) as handle:
        async for item in handle:
            if isinstance(item, bytes):
                size, seconds = item.split()
                rates.append(int(size) / float(seconds) / 2**20)
        assert await handle.wait() == 0, handle.stderr
    return rates


async def main(mib: int, runs: int) -> None:
    configure_logging("WARNING")
    bench = uuid.uuid4().hex[:8]
    server = serve(mib)
    port = server.server_address[1]
    with tempfile.TemporaryDirectory() as tmp:
        proxy_name = f"cage-egress-bench-{bench}"
        data = Path(tmp) / "data"
        isolated = Settings(data_dir=data, egress_container=proxy_name, egress_hosts={NAME: "host-gateway"})
        networked = isolated.model_copy(update={"namespace_egress": False})
        flat = Settings(data_dir=data, egress_container=proxy_name, isolated_networks=False)
        labels = {"cage.bench": bench}
        managers = {
            name: SandboxManager(DockerBackend(s), DockerImageBuilder(s), s, extra_labels=labels)
            for name, s in (("proxied", isolated), ("proxied_network", networked), ("direct", flat))
        }
        results: dict[str, Any] = {"mib": mib, "runs": runs}
        try:
            cases = (
                (
                    "proxied",
                    {"allow": [f"{NAME}:{port}"]},
                    f"http://{NAME}:{port}/",
                    "http://cage-egress:3128",
                ),
                (
                    "proxied_network",
                    {"allow": [f"{NAME}:{port}"]},
                    f"http://{NAME}:{port}/",
                    "http://cage-egress:3128",
                ),
                ("direct", "bridge", f"http://host.docker.internal:{port}/", ""),
            )
            for name, network, url, proxy in cases:
                manager = managers[name]
                lease, acquired = await timed_acquire(manager, network, Path(tmp))
                rates = await download(manager, lease, url, proxy, runs)
                await manager.release(lease)
                results[name] = {
                    "acquire_s": round(acquired, 2),
                    "best_mib_s": round(max(rates), 1),
                    "median_mib_s": round(statistics.median(rates), 1),
                }
            for name in ("proxied", "proxied_network"):
                results[f"{name}_over_direct"] = round(
                    results[name]["median_mib_s"] / results["direct"]["median_mib_s"], 2
                )
        finally:
            client = docker.from_env()
            for container in client.containers.list(all=True, filters={"label": f"cage.bench={bench}"}):
                container.remove(force=True)
            for container in client.containers.list(all=True, filters={"name": proxy_name}):
                container.remove(force=True)
            for volume in client.volumes.list(filters={"label": f"cage.bench={bench}"}):
                volume.remove(force=True)  # the boxes' workspaces
            server.shutdown()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256, help="MiB per download")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.mb, args.runs)
