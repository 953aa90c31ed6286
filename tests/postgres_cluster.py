"""The throw-away Postgres cluster of the store tests (`scripts/ensure-postgres.sh`), shared safely
by parallel workers: one starts it at a time (an `flock`), and the run that started it stops it once,
at its very end (without xdist: the session; with xdist: the controller, after every worker ended).
"""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.run_ids import TEST_RUN

ENSURE_POSTGRES = Path(__file__).resolve().parents[1] / "scripts" / "ensure-postgres.sh"
_LOCK = Path(tempfile.gettempdir()) / "cage-test-postgres.lock"
STARTED = Path(tempfile.gettempdir()) / f"cage-test-postgres-started-by-{TEST_RUN}"
"""Exists while the cluster answers because this run started it."""


class NoPostgres(Exception):
    """`ensure-postgres.sh` could not give a cluster; the message says why."""


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    with _LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure() -> str:
    """The URL of a running cluster, started (and marked as this run's) when it did not answer.

    Raises:
        NoPostgres: the script could not run or failed.
    """
    with _locked():
        was_running = subprocess.run([ENSURE_POSTGRES, "status"], check=False).returncode == 0
        try:
            proc = subprocess.run([ENSURE_POSTGRES], capture_output=True, text=True, timeout=600, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NoPostgres(f"{ENSURE_POSTGRES} could not run: {exc}") from exc
        if proc.returncode != 0 or not proc.stdout.strip():
            raise NoPostgres(
                f"{ENSURE_POSTGRES} failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}"
            )
        if not was_running:
            STARTED.touch()
        return proc.stdout.strip().splitlines()[-1]


def stop_if_started() -> None:
    """Stop the cluster when this run started it; nothing otherwise."""
    with _locked():
        if STARTED.exists():
            subprocess.run([ENSURE_POSTGRES, "stop"], check=False, timeout=120)
            STARTED.unlink(missing_ok=True)
