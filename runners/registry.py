"""Runner name -> adapter. Adapters are imported lazily, so loading one runner never loads the others."""

from __future__ import annotations

import importlib
from typing import cast

from orchestrator.errors import UsageError
from runners.base import RunnerAdapter

_ADAPTERS: dict[str, str] = {
    "claude": "runners.claude:ClaudeAdapter",
    "codex": "runners.codex:CodexAdapter",
    "opencode": "runners.opencode:OpencodeAdapter",
    "tai": "runners.tai:TaiAdapter",
}


def runner_names() -> list[str]:
    """Runners with an adapter, sorted."""
    return sorted(_ADAPTERS)


def adapter_for(name: str) -> RunnerAdapter:
    """A fresh adapter for runner `name`.

    Raises:
        UsageError: no adapter is registered under that name.
    """
    target = _ADAPTERS.get(name)
    if target is None:
        raise UsageError(f"no runner adapter named {name!r}; known: {', '.join(runner_names())}")
    module_name, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    return cast(RunnerAdapter, factory())
