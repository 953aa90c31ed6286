"""Which application directory a command works on, and a clear error when it is not one.

Without `--app` (or `CAGE_APP_DIR`), the nearest directory from the current one upwards that holds
an `agent.yml`, `assistants/` or `connectors/` is the app, the way git finds its repository. The
data directory follows the app (`<app>/.cage`), so `cage keys create` run from a sub-directory
writes to the same database as the server.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import UsageError

if TYPE_CHECKING:
    from orchestrator.settings import Settings

APP_MARKERS = ("agent.yml", "assistants", "connectors")
"""What makes a directory an application directory (any one of them)."""


def is_app_dir(path: Path) -> bool:
    return any((path / marker).exists() for marker in APP_MARKERS)


def find_app_dir(start: Path) -> Path | None:
    """The nearest of `start` and its parents that is an app directory, or None."""
    for candidate in (start, *start.parents):
        if is_app_dir(candidate):
            return candidate
    return None


def resolve_app_dir(explicit: Path | None, cwd: Path) -> Path:
    """`--app` when given (it must be a directory), else the app found from `cwd`, else `cwd`.

    Raises:
        UsageError: `--app` names something that is not a directory.
    """
    if explicit is not None:
        path = (cwd / explicit.expanduser()).resolve()
        if not path.is_dir():
            raise UsageError(f"--app {explicit}: no such directory")
        return path
    return find_app_dir(cwd.resolve()) or cwd.resolve()


def require_app_dir(path: Path) -> Path:
    """`path` when it is an app directory.

    Raises:
        UsageError: it holds none of the markers, with the command that creates one.
    """
    if not is_app_dir(path):
        raise UsageError(
            f"{path} is not a Cage application directory (no agent.yml, assistants/ or connectors/); "
            f"pass --app DIR, or create one with `cage init {path}`"
        )
    return path


def state_settings() -> Settings:
    """Settings for a command that reads or writes the database (`cage keys`).

    Raises:
        UsageError: no data directory was chosen and the app directory is not one, so the
            database would land wherever the command happened to run.
    """
    from orchestrator.settings import Settings

    settings = Settings()
    chosen = any(os.environ.get(name) for name in ("CAGE_DATA_DIR", "CAGE_DATABASE_URL"))
    if not chosen and not is_app_dir(settings.app_dir):
        raise UsageError(
            f"{settings.app_dir} is not a Cage application directory, so it holds no database: "
            "pass --app DIR (the server's), or set CAGE_DATA_DIR or CAGE_DATABASE_URL"
        )
    return settings
