"""The `cage` command: `launch.entry` is the executable, `app` the command tree.

Nothing is imported here: the executable must be able to hand a run to the fork server before
typer or anything of Cage's loads (`orchestrator/cli/launch.py`).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """`orchestrator.cli:entry`, the executable's name in installations made before `launch`."""
    if name == "entry":
        from orchestrator.cli.launch import entry

        return entry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
