"""`orchestrator.pipeline` exports a sorted, complete `__all__` (R15)."""

from __future__ import annotations

import inspect

from orchestrator import pipeline


def test_exports_are_sorted_and_complete() -> None:
    public = sorted(n for n, v in vars(pipeline).items() if not n.startswith("_") and not inspect.ismodule(v))
    assert pipeline.__all__ == public
