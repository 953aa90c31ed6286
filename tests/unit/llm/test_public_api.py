"""`orchestrator.llm` and `orchestrator.llm.tools` export a sorted, complete `__all__` (R15)."""

from __future__ import annotations

import inspect
from types import ModuleType

import pytest

from orchestrator import llm
from orchestrator.llm import tools


@pytest.mark.parametrize("module", [llm, tools], ids=lambda m: m.__name__)
def test_exports_are_sorted_and_complete(module: ModuleType) -> None:
    names = {n for n, v in vars(module).items() if not n.startswith("_") and not inspect.ismodule(v)}
    public = sorted(names | set(vars(module).get("_SDK_CLIENTS", ())))  # loaded on first use
    assert module.__all__ == public
