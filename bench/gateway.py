"""Model gateway bench (issue 12): time to first event through the gateway vs a direct connection.

The same fake model (in-process, SSE over HTTP/1.1 keep-alive) is asked for the same streamed
Anthropic Messages answer, alternately directly and through a `ModelGateway` on loopback, with
one pooled client each; the time from sending the request to the first SSE `data:` line is
measured in one run. Two upstreams are timed:

* `instant`: the fake answers at once, so the gateway's own cost (one more loopback hop, the
  token lookup, the header rewrite) is the whole difference: the worst case for the ratio;
* `50 ms`: the first event comes after 50 ms, the low end of a real model's time to first token.

Target ≤ 1.1× for the `50 ms` upstream (what a runner sees against a real provider); the
`instant` ratio and the absolute overhead are printed as they are. The whole-stream time is
listed to show nothing is buffered (it stays the upstream's).

Usage: `.venv/bin/python bench/gateway.py [--runs 200]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import httpx
from pydantic import SecretStr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.dsl import ConnectorSpec, ConnectorType
from orchestrator.gateway import ModelGateway
from orchestrator.logs import configure_logging
from tests.fakes.model_server import FakeModelServer

TARGET_RATIO = 1.1
BODY = {"model": "m", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "hi"}]}


async def first_event(client: httpx.AsyncClient, url: str, key: str, model: str) -> tuple[float, float]:
    """Seconds to the first `data:` line, and to the end of the stream."""
    started = time.perf_counter()
    first = 0.0
    async with client.stream(
        "POST",
        url,
        json={**BODY, "model": model},
        headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
    ) as response:
        response.raise_for_status()
        async for chunk in response.aiter_raw():
            if not first and b"data:" in chunk:
                first = time.perf_counter() - started
    return first, time.perf_counter() - started


async def measure(runs: int) -> bool:
    ok = True
    with FakeModelServer("text") as fake:
        fake.add_scenario("slow-first", [{"text": "Hello from the fake model.", "delay": 0.05}])
        gateway = ModelGateway(host="127.0.0.1")
        connector = ConnectorSpec(
            id="bench",
            label="bench",
            type=ConnectorType.ANTHROPIC,
            model="m",
            base_url=fake.url,
            key=SecretStr("sk-bench-real-key"),
        )
        access = await gateway.grant(
            sandbox="bench", owner="bench", assistant_id="bench", turn_id="bench", connector=connector
        )
        assert access.connector is not None
        via = access.connector.base_url.replace("host.docker.internal", "127.0.0.1") + "/v1/messages"
        direct = fake.url + "/v1/messages"
        print(f"{'upstream':10} {'path':8} {'first event p50':>16} {'p90':>8} {'whole stream':>13}")
        async with httpx.AsyncClient(timeout=30) as a, httpx.AsyncClient(timeout=30) as b:
            for label, model, judged in (("instant", "m", False), ("50 ms", "m@slow-first", True)):
                count = runs if not judged else max(20, runs // 5)
                samples: dict[str, list[tuple[float, float]]] = {"direct": [], "gateway": []}
                for i in range(count + 5):
                    d = await first_event(a, direct, "sk-bench-real-key", model)
                    g = await first_event(b, via, access.token, model)
                    if i >= 5:  # warm-up: connections, caches
                        samples["direct"].append(d)
                        samples["gateway"].append(g)
                medians = {}
                for path, values in samples.items():
                    firsts = sorted(v[0] for v in values)
                    medians[path] = statistics.median(firsts)
                    p90 = firsts[int(len(firsts) * 0.9)]
                    whole = statistics.median(v[1] for v in values)
                    print(
                        f"{label:10} {path:8} {medians[path] * 1000:13.2f} ms {p90 * 1000:5.2f} ms "
                        f"{whole * 1000:10.2f} ms"
                    )
                ratio = medians["gateway"] / medians["direct"]
                overhead = (medians["gateway"] - medians["direct"]) * 1000
                verdict = f"(target <= {TARGET_RATIO}x)" if judged else "(worst case, not judged)"
                print(f"{label:10} ratio {ratio:.3f}x, +{overhead:.2f} ms per request {verdict}")
                if judged and ratio > TARGET_RATIO:
                    ok = False
        metered = gateway.revoke(access)
        print(f"metered through the gateway: {metered.input_tokens} input, {metered.output_tokens} output")
        await gateway.aclose()
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=200, help="Timed request pairs for the instant upstream.")
    args = parser.parse_args(argv)
    configure_logging("WARNING")  # as `cage run` (the CLI default); per-request lines are debug anyway
    return 0 if anyio.run(measure, args.runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
