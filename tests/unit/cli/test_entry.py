"""The `cage` executable ends its process at once (`entry`/`end_process`), as `sys.exit` would have:
the command's exit code, everything printed flushed, `atexit` callbacks run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def cage(*argv: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
    script = f"import sys\n{prelude}\nfrom orchestrator.cli.app import entry\nsys.argv = ['cage', *{argv!r}]\nentry()\n"
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_a_command_exits_with_its_code_and_its_output_flushed() -> None:
    done = cage("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("cage ")


def test_a_usage_error_keeps_its_exit_code_and_message() -> None:
    done = cage("no-such-command")
    assert done.returncode == 2
    assert "no-such-command" in done.stderr


def test_atexit_callbacks_still_run_before_the_process_ends() -> None:
    prelude = "import atexit\natexit.register(lambda: print('atexit ran', flush=False))"
    done = cage("--version", prelude=prelude)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "atexit ran"


def test_python_dash_m_runs_the_same_entry() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.startswith("cage ")
