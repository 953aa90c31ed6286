"""The API package's exports are sorted and complete; building an app touches no engine."""

from __future__ import annotations

import inspect
import subprocess
import sys

import orchestrator.api as api


def test_exports_are_sorted_and_complete() -> None:
    public = [n for n, v in vars(api).items() if not n.startswith("_") and not inspect.ismodule(v)]
    assert api.__all__ == sorted(api.__all__)
    assert sorted(public) == api.__all__


def test_create_app_connects_to_nothing_until_the_lifespan_runs() -> None:
    code = (
        "import sys; from orchestrator.api import create_app; from orchestrator.settings import Settings; "
        "app = create_app(Settings(docker_host='tcp://127.0.0.1:9', database_url='sqlite+aiosqlite:////nonexistent/x.db')); "
        "print(len(app.openapi()['paths']) > 25, 'docker' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]
