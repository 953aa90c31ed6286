"""scripts/ensure-postgres.sh is idempotent: run again, it answers fast with the same URL."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests.unit.store.conftest import ENSURE_POSTGRES


@pytest.mark.postgres
def test_running_the_script_again_is_fast_and_prints_the_same_url(postgres_url: str) -> None:
    if os.environ.get("CAGE_TEST_POSTGRES_URL"):
        pytest.skip("Postgres comes from CAGE_TEST_POSTGRES_URL; the script is not in use")
    started = time.monotonic()
    proc = subprocess.run([ENSURE_POSTGRES], capture_output=True, text=True, timeout=60, check=True)
    assert time.monotonic() - started < 10
    assert proc.stdout.strip().splitlines()[-1] == postgres_url
    assert postgres_url.startswith("postgresql+asyncpg://") and "@127.0.0.1:" in postgres_url
    assert subprocess.run([ENSURE_POSTGRES, "status"], check=False).returncode == 0
