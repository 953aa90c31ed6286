"""The sandbox package's exports are sorted, complete, and free of the docker SDK."""

from __future__ import annotations

import inspect
import subprocess
import sys

import orchestrator.sandbox as sandbox


def test_exports_are_sorted_and_complete() -> None:
    public = [n for n, v in vars(sandbox).items() if not n.startswith("_") and not inspect.ismodule(v)]
    assert sandbox.__all__ == sorted(sandbox.__all__)
    assert sorted(public) == sandbox.__all__


def test_importing_the_package_does_not_import_docker() -> None:
    code = "import sys, orchestrator.sandbox; print('docker' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
