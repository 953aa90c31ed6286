"""The runner registry: every runner, `yaocode` included, is registered by name; the pipeline
tells a loop runner from a CLI runner by its adapter's type, never by its name."""

from __future__ import annotations

import pytest

from orchestrator.dsl.sandbox import KNOWN_RUNNERS
from orchestrator.errors import UsageError
from runners.loop_adapter import LoopAdapter
from runners.registry import adapter_for, runner_names


def test_every_known_runner_has_an_adapter_under_its_name() -> None:
    assert runner_names() == sorted(KNOWN_RUNNERS)
    assert all(adapter_for(name).name == name for name in runner_names())


def test_yaocode_alone_runs_its_loop_in_the_orchestrator() -> None:
    loops = {name for name in runner_names() if isinstance(adapter_for(name), LoopAdapter)}
    assert loops == {"yaocode"}
    assert all(hasattr(adapter_for(name), "build_exec") for name in set(runner_names()) - loops)
    assert adapter_for("yaocode").image == "tools"


def test_an_unknown_runner_is_a_usage_error_naming_the_known_ones() -> None:
    with pytest.raises(UsageError, match=r"'nope'.*claude, codex, opencode, tai, yaocode"):
        adapter_for("nope")
