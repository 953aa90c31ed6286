"""Soak: mixed sessions against one `cage serve` on loopback for a while, watching for growth.

The same three processes as `bench/sessions.py` (the fake model server, `cage serve`, this
client), all on 127.0.0.1. For `--minutes` (default 30) it keeps a mix going: long-lived websocket
sessions taking turn after turn (and reconnecting with `after_seq` now and then), native SSE turns
in new sessions, non-streamed OpenAI completions, requests without a key, and bodies over the limit.
Retention runs every `--retention` seconds with short session and event TTLs (120 s), so old
sessions and old events go (SQLite reuses the freed pages; the file does not shrink).

Every minute, and at start and end, it reports the server's RSS, its open files, the containers
carrying this run's label and the database size; a steady server is flat (after warm-up) in all
four. Every loop is bounded in count and time and stops by itself; nothing leaves loopback.

Usage: `.venv/bin/python bench/soak.py [--minutes 30] [--sessions 8]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sessions import ADMIN_KEY, MODEL_KEY, ROOT, rss_kib, serving, write_app

from tests.serving import reserve_port  # importable: `sessions` put the checkout on sys.path

AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}
MAX_OPS = 1_000_000
"""A hard bound on the operations of one worker, whatever the duration."""


def sample(pid: int, data: Path, label: str) -> dict[str, Any]:
    files = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    db = sum(p.stat().st_size for p in data.glob("cage.db*"))
    try:
        out = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=cage.soak={label}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout
        containers: int | str = len(out.split())
    except (OSError, subprocess.TimeoutExpired):
        containers = "n/a"
    return {
        "rss_mib": round(rss_kib(pid) / 1024, 1),
        "open_files": files,
        "containers": containers,
        "db_kib": db // 1024,
    }


class Counts:
    def __init__(self) -> None:
        self.ok: dict[str, int] = {}
        self.failed: dict[str, int] = {}

    def add(self, kind: str, ok: bool) -> None:
        table = self.ok if ok else self.failed
        table[kind] = table.get(kind, 0) + 1


async def ws_worker(ws_url: str, base: str, n: int, until: float, counts: Counts) -> None:
    session = f"soak-ws-{n}-{uuid.uuid4().hex[:6]}"
    last = 0
    for _ in range(MAX_OPS):
        if time.monotonic() > until:
            return
        query = f"assistant_id=bench.fast&after_seq={last}"
        async with connect(f"{ws_url}/v1/sessions/{session}/ws?{query}", additional_headers=AUTH) as conn:
            ready = json.loads(await conn.recv())
            counts.add("ws_connect", ready.get("type") == "session.ready")
            for turn in range(5):  # then reconnect from the last seq seen
                if time.monotonic() > until:
                    return
                await conn.send(json.dumps({"type": "user_message", "text": f"turn {turn}"}))
                while True:
                    try:
                        frame = json.loads(await asyncio.wait_for(conn.recv(), timeout=60))
                    except TimeoutError:  # no frame for a minute: count it, reconnect from `last`
                        counts.add("ws_turn_silent_60s", False)
                        break
                    if frame.get("type") == "session.error":
                        counts.add("ws_turn", False)
                        break
                    if frame.get("type") == "event":
                        last = frame["seq"]
                        props = frame["props"]
                        if props.get("event") == "stream_end" and not frame.get("thread_id"):
                            counts.add("ws_turn", props.get("status") == "completed")
                            break
                await asyncio.sleep(0.5)


async def http_worker(base: str, until: float, counts: Counts) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        for n in range(MAX_OPS):
            if time.monotonic() > until:
                return
            body = {"messages": [{"role": "user", "content": f"sse {n}"}]}
            async with http.stream("POST", "/v1/assistants/bench.fast/stream", json=body, headers=AUTH) as r:
                text = "".join([chunk async for chunk in r.aiter_text()])
            counts.add("sse_turn", r.status_code == 200 and '"stream_end"' in text)
            session = {"model": "bench.fast", "messages": [{"role": "user", "content": f"openai {n}"}]}
            answer = await http.post("/v1/chat/completions", json=session, headers=AUTH)
            counts.add("openai_turn", answer.status_code == 200)
            junk = await http.post(
                "/v1/chat/completions", json=session, headers={"Authorization": "Bearer nope"}
            )
            counts.add("refused_401_or_429", junk.status_code in (401, 429))
            try:
                big = await http.put(
                    "/v1/memory/soak",
                    content=b" " * (2 * 2**20),
                    headers={**AUTH, "content-type": "application/json"},
                )
                counts.add("refused_413", big.status_code == 413)
            except httpx.TransportError:  # answered 413 and closed while the client was still sending
                counts.add("refused_413_cut", True)
            await asyncio.sleep(0.2)


async def soak(
    base: str, ws_url: str, pid: int, data: Path, label: str, minutes: float, sessions: int
) -> int:
    until = time.monotonic() + minutes * 60
    counts = Counts()
    rows = [("start", sample(pid, data, label))]
    print(f"{'when':>8}  " + "  ".join(f"{k:>10}" for k in rows[0][1]), flush=True)
    print(f"{'start':>8}  " + "  ".join(f"{v!s:>10}" for v in rows[0][1].values()), flush=True)

    async def monitor() -> None:
        minute = 0
        while time.monotonic() < until:
            await asyncio.sleep(min(60.0, max(0.1, until - time.monotonic())))
            minute += 1
            row = sample(pid, data, label)
            rows.append((f"{minute} min", row))
            print(f"{minute:>4} min  " + "  ".join(f"{v!s:>10}" for v in row.values()), flush=True)

    workers = [ws_worker(ws_url, base, n, until, counts) for n in range(sessions)]
    workers += [http_worker(base, until, counts) for _ in range(2)]
    results = await asyncio.gather(monitor(), *workers, return_exceptions=True)
    crashed = [r for r in results if isinstance(r, BaseException)]
    await asyncio.sleep(2.0)
    end = sample(pid, data, label)
    print(f"{'end':>8}  " + "  ".join(f"{v!s:>10}" for v in end.values()))
    print("ok:", json.dumps(counts.ok, sort_keys=True))
    print("failed:", json.dumps(counts.failed, sort_keys=True))
    for exc in crashed[:3]:
        print("worker error:", type(exc).__name__, str(exc)[:200])
    return 0 if not counts.failed and not crashed else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--sessions", type=int, default=8, help="long-lived websocket sessions")
    parser.add_argument("--retention", type=float, default=30.0, help="seconds between retention sweeps")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cage-soak-"))
    model_port, port = reserve_port(), reserve_port()
    write_app(work / "app", model_port)
    label = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAGE_")}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "BENCH_MODEL_KEY": MODEL_KEY,
            "CAGE_APP_DIR": str(work / "app"),
            "CAGE_DATA_DIR": str(work / "data"),
            "CAGE_BOOTSTRAP_ADMIN_KEY": ADMIN_KEY,
            "CAGE_SANDBOX_LABELS": json.dumps({"cage.soak": label}),  # reconcile nothing else
            "CAGE_RATE_LIMIT_PER_MINUTE": "1000000",
            "CAGE_RATE_LIMIT_BURST": "100000",
            "CAGE_SESSION_TTL_SECONDS": "120",
            "CAGE_EVENT_TTL_SECONDS": "120",  # the long-lived sessions' logs too
            "CAGE_RETENTION_INTERVAL": str(args.retention),
            "CAGE_LOG_LEVEL": "WARNING",
        }
    )
    with serving(env, work, model_port, port) as server:
        code = asyncio.run(
            soak(
                f"http://127.0.0.1:{port}",
                f"ws://127.0.0.1:{port}",
                server.pid,
                work / "data",
                label,
                args.minutes,
                args.sessions,
            )
        )
    print("OK" if code == 0 else f"FAILED (logs in {work})")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
