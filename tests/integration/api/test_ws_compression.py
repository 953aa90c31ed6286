"""`cage serve` answers a websocket client that offers permessage-deflate without it, unless
`CAGE_WS_COMPRESSION` turns it on (each compressed connection keeps zlib state: memory per idle
session, bench/memory.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from websockets.sync.client import connect

from tests.serving import reserve_port, wait_until_healthy
from tests.subprocess_env import EGRESS_VAR, subprocess_env

CAGE = [sys.executable, "-m", "orchestrator.cli"]


def _extensions(tmp_path: Path, labels: dict[str, str], compression: str | None) -> str | None:
    """The `Sec-WebSocket-Extensions` a real `cage serve` answers to a client offering deflate."""
    subprocess.run([*CAGE, "init", "app"], cwd=tmp_path, check=True, capture_output=True)
    app = tmp_path / "app"
    env = subprocess_env(keep={EGRESS_VAR})
    env["CAGE_SANDBOX_LABELS"] = json.dumps(labels)
    if compression is not None:
        env["CAGE_WS_COMPRESSION"] = compression
    port = reserve_port()
    log = app / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*CAGE, "serve", "--port", str(port)], cwd=app, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_until_healthy(proc, port, log)
        with connect(f"ws://127.0.0.1:{port}/v1/sessions/chat-1/ws", compression="deflate") as ws:
            assert ws.response is not None
            refused = json.loads(ws.recv())  # no key: refused after the handshake
            assert refused["type"] == "session.error"
            return ws.response.headers.get("Sec-WebSocket-Extensions")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_websockets_are_not_compressed_by_default(tmp_path: Path, test_run_labels: dict[str, str]) -> None:
    assert _extensions(tmp_path, test_run_labels, None) is None


def test_cage_ws_compression_turns_permessage_deflate_on(
    tmp_path: Path, test_run_labels: dict[str, str]
) -> None:
    extensions = _extensions(tmp_path, test_run_labels, "true")
    assert extensions is not None and "permessage-deflate" in extensions
