"""Websocket session bench: many concurrent sessions against one `cage serve` on loopback.

Three processes: the fake model server, `cage serve` (the real app: `PipelineService`, SQLite,
the Docker engine for readiness only), and this client. Each session runs turns of a fast runner:
an LLM-mode assistant whose native loop answers from the fake model server in-process (no
container), so the figures measure the orchestrator (pipeline, event log, fan-out, websocket).

Reports turns/s, the delay between an event's creation (`ts`, stamped by the session emitter)
and its arrival at the client (p50/p99), and the server's memory per idle session (RSS growth
for sessions that are open but idle). Checks that no event is lost or reordered: every session's
seqs are 1..N without a gap, and equal the durable log.

Usage: `.venv/bin/python bench/sessions.py [--sessions 50] [--turns 4]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

ROOT = Path(__file__).resolve().parents[1]
ADMIN_KEY = "bench-" + uuid.uuid4().hex
MODEL_KEY = "sk-bench-fake-key-" + uuid.uuid4().hex[:12]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def write_app(root: Path, model_port: int) -> None:
    (root / "connectors").mkdir(parents=True)
    (root / "connectors" / "fake.conn.yao").write_text(
        json.dumps(
            {
                "label": "fake",
                "type": "openai",
                "options": {
                    "model": "bench-model",
                    "key": "$ENV.BENCH_MODEL_KEY",
                    "host": f"http://127.0.0.1:{model_port}/v1",
                },
            }
        )
    )
    assistant = root / "assistants" / "bench" / "fast"
    assistant.mkdir(parents=True)
    (assistant / "package.yao").write_text('{"name": "bench fast", "connector": "fake"}')
    (assistant / "prompts.yml").write_text("- role: system\n  content: Answer briefly.\n")


@dataclass
class Session:
    chat_id: str
    conn: ClientConnection | None = None
    seqs: list[int] = field(default_factory=list)
    delays_ms: list[float] = field(default_factory=list)
    turns_done: int = 0
    errors: list[str] = field(default_factory=list)


async def open_session(ws_url: str, session: Session) -> None:
    session.conn = await connect(
        f"{ws_url}/v1/sessions/{session.chat_id}/ws?assistant_id=bench.fast",
        additional_headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        max_size=2**24,
    )
    ready = json.loads(await session.conn.recv())
    if ready.get("type") != "session.ready":
        raise RuntimeError(f"session {session.chat_id}: {ready}")


async def run_turns(session: Session, turns: int) -> None:
    conn = session.conn
    assert conn is not None
    for n in range(turns):
        await conn.send(json.dumps({"type": "user_message", "text": f"turn {n} of {session.chat_id}"}))
        while True:
            frame = json.loads(await conn.recv())
            arrived = time.time() * 1000
            kind = frame.get("type", "")
            if kind == "session.error":
                session.errors.append(frame["message"])
                return
            if kind.startswith("session."):
                continue
            session.seqs.append(frame["seq"])
            session.delays_ms.append(arrived - frame["ts"])
            props = frame.get("props", {})
            if kind == "event" and props.get("event") == "stream_end" and not frame.get("thread_id"):
                if props.get("status") != "completed":
                    session.errors.append(f"turn ended {props.get('status')}: {props.get('error')}")
                session.turns_done += 1
                break


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=ROOT)


def wait_http(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.TransportError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer")


async def bench(base_url: str, ws_url: str, server_pid: int, sessions: int, turns: int) -> dict[str, Any]:
    all_sessions = [Session(chat_id=f"bench-{i:03d}-{uuid.uuid4().hex[:6]}") for i in range(sessions)]
    await asyncio.sleep(1.0)
    before = rss_kib(server_pid)
    await asyncio.gather(*(open_session(ws_url, s) for s in all_sessions))
    await asyncio.sleep(1.0)
    idle = rss_kib(server_pid)
    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(run_turns(s, turns) for s in all_sessions)), timeout=600)
    elapsed = time.perf_counter() - started
    after_turns = rss_kib(server_pid)
    lost = 0
    async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
        for s in all_sessions:
            logged = (await http.get(f"/v1/sessions/{s.chat_id}/events", params={"limit": 10000})).json()
            expected = [e["seq"] for e in logged["events"]]
            if s.seqs != list(range(1, len(s.seqs) + 1)) or s.seqs != expected:
                lost += 1
    for s in all_sessions:
        if s.conn is not None:
            await s.conn.close()
    delays = [d for s in all_sessions for d in s.delays_ms]
    done = sum(s.turns_done for s in all_sessions)
    return {
        "sessions": sessions,
        "turns": done,
        "seconds": round(elapsed, 2),
        "turns_per_s": round(done / elapsed, 1),
        "events": len(delays),
        "delay_ms_p50": round(percentile(delays, 0.50), 1),
        "delay_ms_p99": round(percentile(delays, 0.99), 1),
        "delay_ms_max": round(max(delays), 1),
        "rss_mib_start": round(before / 1024, 1),
        "rss_kib_per_idle_session": round((idle - before) / sessions, 1),
        "rss_mib_after_turns": round(after_turns / 1024, 1),
        "sessions_with_lost_or_reordered_events": lost,
        "errors": sorted({e for s in all_sessions for e in s.errors})[:5],
    }


@contextmanager
def serving(env: dict[str, str], work: Path, model_port: int, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """The fake model server and `cage serve` on loopback, both answering; yields the server and
    stops both (SIGTERM, then SIGKILL after 30 s) however the block ends."""
    py = sys.executable
    model = start(
        [py, "-m", "tests.fakes.model_server", "--host", "127.0.0.1", "--port", str(model_port),
         "--scenario", "text"],
        env,
        work / "model.log",
    )
    server = start(
        [py, "-m", "orchestrator.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env,
        work / "server.log",
    )
    try:
        deadline = time.monotonic() + 60
        wait_http(f"http://127.0.0.1:{model_port}/v1/models", deadline)
        wait_http(f"http://127.0.0.1:{port}/healthz", deadline)
        yield server
    finally:
        for proc in (server, model):
            proc.send_signal(signal.SIGTERM)
        for proc in (server, model):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--turns", type=int, default=4, help="turns per session, one after the other")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cage-bench-"))
    model_port, port = free_port(), free_port()
    write_app(work / "app", model_port)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAGE_")}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "BENCH_MODEL_KEY": MODEL_KEY,
            "CAGE_APP_DIR": str(work / "app"),
            "CAGE_DATA_DIR": str(work / "data"),
            "CAGE_BOOTSTRAP_ADMIN_KEY": ADMIN_KEY,
            "CAGE_SANDBOX_LABELS": json.dumps({"cage.bench": uuid.uuid4().hex}),  # reconcile nothing else
            "CAGE_RATE_LIMIT_PER_MINUTE": "1000000",
            "CAGE_RATE_LIMIT_BURST": "100000",
            "CAGE_LOG_LEVEL": "WARNING",
        }
    )
    with serving(env, work, model_port, port) as server:
        result = asyncio.run(
            bench(f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}", server.pid, args.sessions, args.turns)
        )
    width = max(len(k) for k in result)
    for key, value in result.items():
        print(f"{key:<{width}}  {value}")
    ok = result["sessions_with_lost_or_reordered_events"] == 0 and not result["errors"]
    ok = ok and result["turns"] == args.sessions * args.turns
    print("OK: no event lost or reordered" if ok else f"FAILED (logs in {work})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
