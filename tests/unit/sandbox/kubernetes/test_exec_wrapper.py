"""The pods/exec wrapper and status parsing, run with the host's real `sh` and `setsid`."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from orchestrator.sandbox.kubernetes.exec import PGID_MARKER, exit_code, signal_argv, wrap_argv


def test_the_wrapper_reports_its_group_then_runs_in_workdir_with_env(tmp_path: object) -> None:
    argv = wrap_argv(
        ("sh", "-c", 'pwd; echo "$GREETING"; exit 3'), env={"GREETING": "hi there"}, workdir="/tmp"
    )
    done = subprocess.run(argv, capture_output=True, check=False, env={"PATH": os.environ["PATH"]})
    first, *rest = done.stdout.splitlines()
    assert first.startswith(PGID_MARKER + b" ") and int(first.split()[1]) > 1
    assert rest == [b"/tmp", b"hi there"] and done.returncode == 3


def test_a_missing_workdir_fails_before_the_command() -> None:
    done = subprocess.run(
        wrap_argv(("echo", "ran"), env={}, workdir="/nonexistent-dir"), capture_output=True, check=False
    )
    assert done.returncode == 126 and b"ran" not in done.stdout


def test_signal_argv_reaches_the_whole_group() -> None:
    script = "sleep 30 & sleep 30 & wait"
    with subprocess.Popen(
        wrap_argv(("sh", "-c", script), env={}, workdir=""), stdout=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None
        pgid = int(proc.stdout.readline().split()[1])
        subprocess.run(signal_argv(pgid, signal.SIGKILL), check=True)
        assert proc.wait(timeout=30) != 0
    # every member killed: none left but zombies waiting for init (a killed process may still be
    # exiting for a moment on a loaded machine, so look until none is, or 30 s have passed)
    deadline = time.monotonic() + 30
    while (alive := living_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive == []


def living_members(pgid: int) -> list[int]:
    """Processes of group `pgid` that are not zombies, read from /proc (`ps -g` selects by session
    or effective group, not by process group)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        state, _ppid, group = stat.rsplit(")", 1)[1].split()[:3]
        if int(group) == pgid and state != "Z":
            found.append(int(entry.name))
    return found


def test_status_messages_give_the_exit_code() -> None:
    assert exit_code(b'{"metadata":{},"status":"Success"}') == 0
    failure = b'{"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"7"}]}}'
    assert exit_code(failure) == 7
    assert exit_code(b'{"status":"Failure","message":"container not found"}') == -1
    assert exit_code(b"not json") == -1
