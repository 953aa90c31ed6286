"""Fake assistants for pipeline tests: a copy of `app/` plus what depends on the run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

APP = Path(__file__).parent / "app"


def make_app(root: Path) -> Path:
    """A fresh application directory with every hook assistant of `app/`."""
    shutil.copytree(APP, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def write_assistant(
    root: Path,
    assistant_id: str,
    *,
    package: dict[str, Any] | None = None,
    hooks: str | None = None,
    prompts: str | None = None,
    sandbox: dict[str, Any] | None = None,
) -> Path:
    """Write (or overwrite) an assistant directory `assistants/<a>/<b>`."""
    directory = root / "assistants" / Path(*assistant_id.split("."))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "package.yao").write_text(json.dumps(package or {"name": assistant_id}))
    if hooks is not None:
        (directory / "src").mkdir(exist_ok=True)
        (directory / "src" / "index.py").write_text(hooks)
    if prompts is not None:
        (directory / "prompts.yml").write_text(prompts)
    if sandbox is not None:
        (directory / "sandbox.yao").write_text(json.dumps(sandbox))
    return directory


def write_connector(root: Path, conn_id: str, *, kind: str, model: str, host: str, key_env: str) -> None:
    """A connector to the fake model server (`kind` anthropic or openai)."""
    (root / "connectors").mkdir(parents=True, exist_ok=True)
    options = {"model": model, "key": f"$ENV.{key_env}", "host": host, "max_retries": 1}
    (root / "connectors" / f"{conn_id}.conn.yao").write_text(
        json.dumps({"label": conn_id, "type": kind, "options": options})
    )
