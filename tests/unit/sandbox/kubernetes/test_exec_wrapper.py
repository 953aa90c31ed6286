"""The pods/exec wrapper and status parsing, run with the host's real `sh` and `setsid`."""

from __future__ import annotations

import os
import signal
import subprocess

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
    states = subprocess.run(["ps", "-o", "stat=", "-g", str(pgid)], capture_output=True, check=False).stdout
    assert [s for s in states.split() if not s.startswith(b"Z")] == []  # killed (zombies wait for init)


def test_status_messages_give_the_exit_code() -> None:
    assert exit_code(b'{"metadata":{},"status":"Success"}') == 0
    failure = b'{"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"7"}]}}'
    assert exit_code(failure) == 7
    assert exit_code(b'{"status":"Failure","message":"container not found"}') == -1
    assert exit_code(b"not json") == -1
