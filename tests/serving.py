"""Waiting for a `cage serve` started as a subprocess to answer."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx


def wait_until_healthy(proc: subprocess.Popen[bytes], port: int, log: Path, *, within: float = 60) -> None:
    """Return once `/healthz` on 127.0.0.1:`port` says 200 (at most `within` seconds); fail with
    the server's log when it exits first."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)
