"""`python -m tests.fakes.model_server` runs the server on its own."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[3]


def test_standalone_server_plays_a_scenario_file_and_logs(tmp_path: Path) -> None:
    script = tmp_path / "greet.json"
    script.write_text(json.dumps([{"text": "hi from a file"}]))
    extra = tmp_path / "other.json"
    extra.write_text(json.dumps({"name": "other", "steps": [{"text": "other one"}]}))
    log = tmp_path / "requests.jsonl"
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.fakes.model_server",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--scenario",
            str(script),
            "--add",
            str(extra),
            "--log",
            str(log),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            banner = proc.stdout.readline().strip()
            assert banner.startswith("fake model server listening on http://127.0.0.1:")
            url = banner.rsplit(" ", 1)[1]
            body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
            first = httpx.post(
                f"{url}/v1/chat/completions", json=body, headers={"authorization": "Bearer s3cret-value"}
            )
            second = httpx.post(f"{url}/v1/chat/completions", json={**body, "model": "scenario:other"})
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=10)
    assert code == 0
    assert first.json()["choices"][0]["message"]["content"] == "hi from a file"
    assert second.json()["choices"][0]["message"]["content"] == "other one"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["scenario"], r["step"]) for r in records] == [("greet", 0), ("other", 0)]
    assert "s3cret-value" not in log.read_text()
