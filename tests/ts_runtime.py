"""Tests that run TypeScript hooks install the runtime first (`scripts/install-hooks-ts.sh`, from
the npm registry), so CI runs them instead of skipping; only a host without node skips them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.hooks_ts import available

INSTALL = Path(__file__).resolve().parents[1] / "scripts" / "install-hooks-ts.sh"


def ensure_ts_runtime() -> None:
    """Install esbuild when it is missing; skip when node itself is missing."""
    if not available():
        return
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip(available())
    subprocess.run([str(INSTALL)], check=True, timeout=600)
    assert available() == "", available()
