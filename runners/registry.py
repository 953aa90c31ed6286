"""Runner name -> adapter. Adapters are imported lazily, so loading one runner never loads the others.

A CLI runner's adapter is a `RunnerAdapter` (the bridge execs it in the sandbox); `yaocode`'s is
a `LoopAdapter` (its loop runs in the orchestrator, only its tools in the sandbox).
"""

from __future__ import annotations

import importlib
from typing import cast

from orchestrator.errors import UsageError
from runners.base import RunnerAdapter
from runners.loop_adapter import LoopAdapter

Adapter = RunnerAdapter | LoopAdapter

_ADAPTERS: dict[str, str] = {
    "claude": "runners.claude:ClaudeAdapter",
    "codex": "runners.codex:CodexAdapter",
    "opencode": "runners.opencode:OpencodeAdapter",
    "tai": "runners.tai:TaiAdapter",
    "yaocode": "runners.yaocode:YaocodeAdapter",
}


def runner_names() -> list[str]:
    """Runners with an adapter, sorted."""
    return sorted(_ADAPTERS)


def adapter_for(name: str) -> Adapter:
    """A fresh adapter for runner `name`.

    Raises:
        UsageError: no adapter is registered under that name.
    """
    target = _ADAPTERS.get(name)
    if target is None:
        raise UsageError(f"no runner adapter named {name!r}; known: {', '.join(runner_names())}")
    module_name, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    return cast(Adapter, factory())
