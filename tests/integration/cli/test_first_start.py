"""`cage serve` on a fresh app directory: it creates the first admin key and says where it listens,
so the first request is not a 401 with no way out; the token never reaches the log stream."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.serving import reserve_port, wait_until_healthy
from tests.subprocess_env import EGRESS_VAR, subprocess_env

CAGE = [sys.executable, "-m", "orchestrator.cli"]


def _serve(app: Path, port: int, labels: dict[str, str], *root_args: str) -> tuple[int, str]:
    """Run `cage serve` (stderr not a TTY) until it answers, stop it, return (rc, its output)."""
    env = subprocess_env(keep={EGRESS_VAR})
    env["CAGE_SANDBOX_LABELS"] = json.dumps(labels)
    log = app / "serve.log"
    reserve_port(port)  # again: the second start reuses the port of the first
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*CAGE, *root_args, "serve", "--port", str(port)],
            cwd=app,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until_healthy(proc, port, log)
        key_file = app / ".cage" / "first-admin-key"
        if key_file.exists():
            token = key_file.read_text().strip()
            models = httpx.get(
                f"http://127.0.0.1:{port}/v1/models", headers={"Authorization": f"Bearer {token}"}
            )
            assert models.status_code == 200, models.text
            assert "app.chat" in {m["id"] for m in models.json()["data"]}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    return proc.returncode, log.read_text()


def test_first_start_creates_one_admin_key_and_says_how_to_connect(
    tmp_path: Path, test_run_labels: dict[str, str]
) -> None:
    subprocess.run([*CAGE, "init", "app"], cwd=tmp_path, check=True, capture_output=True)
    app = tmp_path / "app"
    port = reserve_port()
    _, first = _serve(app, port, test_run_labels)
    key_file = app / ".cage" / "first-admin-key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    token = key_file.read_text().strip()
    assert token.startswith("cage_") and token not in first  # handed over in the file, not the log
    assert f"on http://127.0.0.1:{port}" in first and f"{port}/docs" in first and f"{port}/ui/" in first
    assert 'curl -H "Authorization: Bearer $CAGE_KEY"' in first
    assert "created the first admin key" in first

    assert '"event": "request"' not in first  # the one default level, WARNING: no request log lines

    key_file.unlink()
    _, second = _serve(app, port, test_run_labels, "--log-level", "INFO")  # the global flag reaches serve
    assert '"event": "request"' in second
    assert "created the first admin key" not in second  # an admin key exists: no second one
    assert not key_file.exists()
    keys = subprocess.run(
        [*CAGE, "--app", str(app), "keys", "list", "--json"],
        capture_output=True,
        text=True,
        check=True,
        env=subprocess_env(keep={EGRESS_VAR}),
    )
    assert [k["role"] for k in json.loads(keys.stdout)] == ["admin"]
