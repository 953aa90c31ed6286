"""Memory bench: what an idle websocket session costs the server, and whether sessions that have
come and gone leave anything behind.

The same three processes as `bench/sessions.py` (the fake model server, `cage serve` on SQLite,
this client), all on 127.0.0.1. After one warm-up turn (the first turn's imports are not a
session's cost) it

1. opens `--idle` session websockets that only wait (`session.ready`, no turn) and reports the
   server's RSS growth per session; then closes them;
2. lets `--churn` sessions come and go, `--wave` at a time: each opens its websocket, takes one
   turn in a new session, and closes; the server's RSS after the last wave is compared with its RSS
   before the first one (one wave is run first, so pools and caches warmed by a turn are not
   counted as growth), and half-way through (growth that slows down is caches filling up;
   growth that does not is a leak).

Targets (issue 14): at most 100 KiB per idle session; once warm, sessions that come and go
leave nothing: the second half of the churn grows the RSS by at most `--tolerance` MiB (the first
half warms what a busy server keeps: the pool's connections and their page caches, SQLAlchemy's
and SQLite's statement caches, the allocator's arenas; measured at about 40 MiB for the first 200
sessions and about 3 MiB for the next 200). RSS is read from /proc, settled: sampled until two
reads a second apart agree within 64 KiB (the allocator returns freed pages lazily).

Usage: `.venv/bin/python bench/memory.py [--idle 200] [--churn 400] [--wave 20]`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sessions import Session, bench_env, open_session, rss_kib, run_turns, serving, write_app

from tests.serving import reserve_port  # importable: `sessions` put the checkout on sys.path

IDLE_KIB_TARGET = 100.0
SETTLE_KIB = 64


async def settled_rss(pid: int, *, attempts: int = 20) -> int:
    """The server's RSS once two samples a second apart differ by at most `SETTLE_KIB`."""
    last = rss_kib(pid)
    for _ in range(attempts):
        await asyncio.sleep(1.0)
        now = rss_kib(pid)
        if abs(now - last) <= SETTLE_KIB:
            return now
        last = now
    return last


async def one_session(ws_url: str) -> list[str]:
    session = Session(session_id=f"mem-{uuid.uuid4().hex[:10]}")
    await open_session(ws_url, session)
    try:
        await run_turns(session, 1)
    finally:
        assert session.conn is not None
        await session.conn.close()
    return session.errors + ([] if session.turns_done == 1 else ["the turn did not end"])


async def wave(ws_url: str, count: int) -> list[str]:
    results = await asyncio.gather(*(one_session(ws_url) for _ in range(count)))
    return [error for errors in results for error in errors]


async def measure(ws_url: str, pid: int, idle: int, churn: int, size: int) -> dict[str, Any]:
    errors = await wave(ws_url, 1)  # warm-up: the first turn's imports
    if errors:
        raise RuntimeError(f"the warm-up turn failed: {errors}")
    before_idle = await settled_rss(pid)
    sessions = [Session(session_id=f"mem-idle-{i:04d}-{uuid.uuid4().hex[:6]}") for i in range(idle)]
    for start in range(0, idle, 50):  # 50 handshakes at a time
        await asyncio.gather(*(open_session(ws_url, s) for s in sessions[start : start + 50]))
    with_idle = await settled_rss(pid)
    for s in sessions:
        if s.conn is not None:
            await s.conn.close()
    errors += await wave(ws_url, size)  # warms what a turn in a new session warms
    start_rss = await settled_rss(pid)
    started = time.perf_counter()
    half = (churn // 2) // size * size
    mid_rss = start_rss
    for done in range(0, churn, size):
        if done == half:
            mid_rss = await settled_rss(pid)
        errors += await wave(ws_url, min(size, churn - done))
    elapsed = time.perf_counter() - started
    end_rss = await settled_rss(pid)
    return {
        "idle_sessions": idle,
        "rss_mib_before_idle": round(before_idle / 1024, 1),
        "rss_mib_with_idle": round(with_idle / 1024, 1),
        "kib_per_idle_session": round((with_idle - before_idle) / idle, 1),
        "churned_sessions": churn,
        "churn_seconds": round(elapsed, 1),
        "rss_mib_before_churn": round(start_rss / 1024, 1),
        "rss_mib_half_way": round(mid_rss / 1024, 1),
        "rss_mib_after_churn": round(end_rss / 1024, 1),
        "rss_kib_growth_per_churned_session": round((end_rss - start_rss) / churn, 1),
        "errors": sorted(set(errors))[:5],
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--idle", type=int, default=200, help="idle sessions held open at once")
    parser.add_argument("--churn", type=int, default=400, help="sessions that come and go")
    parser.add_argument("--wave", type=int, default=20, help="churned sessions at a time")
    parser.add_argument("--tolerance", type=float, default=8.0, help="MiB the RSS may end above its start")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cage-bench-memory-"))
    model_port, port = reserve_port(), reserve_port()
    write_app(work / "app", model_port)
    env = bench_env(work, f"sqlite+aiosqlite:///{work / 'data' / 'cage.db'}")
    with serving(env, work, model_port, port) as server:
        result = asyncio.run(measure(f"ws://127.0.0.1:{port}", server.pid, args.idle, args.churn, args.wave))
    width = max(len(k) for k in result)
    for key, value in result.items():
        print(f"{key:<{width}}  {value}")
    failures = []
    if result["errors"]:
        failures.append(f"sessions failed (logs in {work})")
    if result["kib_per_idle_session"] > IDLE_KIB_TARGET:
        failures.append(f"{result['kib_per_idle_session']} KiB per idle session > {IDLE_KIB_TARGET} KiB")
    growth = result["rss_mib_after_churn"] - result["rss_mib_half_way"]
    if growth > args.tolerance:
        failures.append(
            f"RSS grew {growth:.1f} MiB over the second {args.churn - args.churn // 2} sessions"
            f" > {args.tolerance} MiB"
        )
    for failure in failures:
        print(f"FAILED: {failure}")
    if not failures:
        print("OK: idle sessions are cheap and sessions that have gone leave nothing behind")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
