"""H7 / issue 12: no runner's container ever holds the real model key.

For each runner a `cage run` turn against the fake model (through the gateway) plays a tool call
that dumps the agent's `env`, every readable `/proc/*/environ` and `cmdline`, and the CLI's home
and config directories into the workspace. The canary key (no key shape, so the redactor is not
what hides it) must then appear nowhere: not in the workspace, not anywhere in the container's
filesystem or configuration, not in the events, the logs or the data dir; the turn completes,
and the fake model received the canary itself (the gateway added it on the way out).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from tests.security.keys_rig import *  # noqa: F403 - the fixtures
from tests.security.keys_rig import KeysApp

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CAGE = [sys.executable, "-m", "orchestrator.cli"]
DUMP = (
    "mkdir -p dump && env > dump/env.txt && "
    "(for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do echo \"== $f\"; tr '\\0' '\\n' < \"$f\"; done)"
    " > dump/proc.txt 2>/dev/null; "
    'for d in "$HOME" "$CODEX_HOME" "$XDG_CONFIG_HOME" "$OPENCODE_CONFIG"; do '
    '[ -n "$d" ] && cp -a "$d" dump/ 2>/dev/null; done; '
    "env | rev > dump/env.rev; touch dump/ready; "
    "n=0; while [ ! -f release ] && [ $n -lt 600 ]; do sleep 0.2; n=$((n+1)); done; echo dumped"
)
"""Dump, then wait (while the test searches the live container) until the test writes `release`."""
RUNNERS = ["claude", "codex", "opencode", "tai", "yaocode"]


def _forms(key: str) -> list[bytes]:
    """The key as it is, reversed and base64-encoded (the shapes an agent would smuggle it in)."""
    return [key.encode(), key[::-1].encode(), base64.b64encode(key.encode()).rstrip(b"=")[:16]]


def _files_holding(root: Path, key: str) -> list[str]:
    forms = _forms(key)
    return [
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and any(f in p.read_bytes() for f in forms)
    ]


def _boxes(
    client: docker.DockerClient, app: KeysApp, assistant: str
) -> list[docker.models.containers.Container]:
    labels = [f"{k}={v}" for k, v in app.labels.items()] + [f"cage.assistant={assistant}"]
    boxes: list[docker.models.containers.Container] = client.containers.list(
        all=True, filters={"label": labels}
    )
    return boxes


@pytest.mark.parametrize("runner", RUNNERS)
def test_the_key_never_enters_the_container(
    runner: str, keys_app: KeysApp, tmp_path: Path, docker_engine: docker.DockerClient
) -> None:
    server = keys_app.server
    scenario = f"canary-{runner}"
    server.add_scenario(scenario, [{"shell": DUMP}, {"text": "dumped everything"}])
    assistant = keys_app.assistant(runner, scenario)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.chown(workspace, 1000, 1000)  # a CI user's checkout: `cage run` never runs the agent as root
    before = len(server.requests.all())
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"  # files: a full pipe would stall the run
    with stdout.open("w") as out_file, stderr.open("w") as err_file:
        proc = subprocess.Popen(
            [
                *CAGE,
                "run",
                assistant,
                "--workspace",
                str(workspace),
                "--prompt",
                "dump it",
                "--output",
                "jsonl",
                "--output-dir",
                str(tmp_path / "out"),
            ],
            env=keys_app.env(),
            stdout=out_file,
            stderr=err_file,
        )
    key = keys_app.key
    try:
        deadline = time.monotonic() + 240
        while not (workspace / "dump" / "ready").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the dump never ran"
            time.sleep(0.2)
        (box,) = _boxes(docker_engine, keys_app, assistant)  # searched while the CLI is running
        assert key not in json.dumps(box.attrs)  # env, labels, command line
        scan = box.exec_run(
            [
                "grep",
                "-rlsF",
                "--devices=skip",
                key,
                "/",
                "--exclude-dir=proc",
                "--exclude-dir=sys",
                "--exclude-dir=dev",
            ],
            user="0",
        )
        # 1: nothing matched; 2: also some special file could not be read (-s keeps them quiet)
        assert scan.exit_code in (1, 2) and scan.output == b"", scan.output.decode()[-2000:]
        environs = box.exec_run(
            ["sh", "-c", "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null"], user="0"
        )
        assert b"PATH=" in environs.output  # (exit 1: some process ended while cat read it)
        assert key.encode() not in environs.output
    finally:
        (workspace / "release").touch()
        proc.wait(timeout=240)
    out, err = stdout.read_text(), stderr.read_text()

    assert proc.returncode == 0, err[-3000:]
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert events[-1]["props"]["event"] == "stream_end" and events[-1]["props"]["status"] == "completed"
    assert "PATH=" in (workspace / "dump" / "env.txt").read_text()  # the dump ran
    if runner != "yaocode":
        assert "cage-gw-" in (workspace / "dump" / "proc.txt").read_text()  # the CLI held a token instead
    assert _files_holding(workspace, key) == []
    assert _files_holding(tmp_path / "out", key) == []
    assert _files_holding(keys_app.data_dir, key) == []  # the SQLite event log, checkpoints
    for form in _forms(key):
        assert form.decode() not in out + err
    assert _boxes(docker_engine, keys_app, assistant) == []
    played = [r for r in server.requests.all()[before:] if r.scenario == scenario]
    assert played and {r.credential_sha256 for r in played} == {hashlib.sha256(key.encode()).hexdigest()}
