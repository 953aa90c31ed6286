"""`--set sandbox.key=value` and `--env K=V` overrides."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from orchestrator.cli.overrides import apply_env, apply_sets
from orchestrator.dsl import Lifecycle, SandboxSpec
from orchestrator.errors import ConfigError, UsageError

SPEC = SandboxSpec.model_validate(
    {"version": "2.0", "runner": {"name": "claude"}, "computer": {"memory": "1GB"}}
)
FILE = Path("assistants/x/sandbox.yao")


def test_sets_are_typed_and_nested() -> None:
    spec = apply_sets(
        SPEC,
        [
            "sandbox.lifecycle=session",
            "sandbox.computer.cpus=1.5",
            "sandbox.runner.options.max_turns=3",
            "sandbox.idle_timeout=10m",
        ],
        file=FILE,
    )
    assert spec.lifecycle is Lifecycle.SESSION and spec.computer.cpus == 1.5
    assert spec.runner.options == {"max_turns": 3} and spec.idle_timeout == timedelta(minutes=10)
    assert spec.computer.memory == 2**30  # untouched keys survive


@pytest.mark.parametrize("item", ["lifecycle=session", "sandbox.=x", "sandbox.lifecycle"])
def test_malformed_sets_are_usage_errors(item: str) -> None:
    with pytest.raises(UsageError, match="--set"):
        apply_sets(SPEC, [item], file=FILE)


def test_invalid_values_name_the_key_and_the_option() -> None:
    with pytest.raises(ConfigError) as info:
        apply_sets(SPEC, ["sandbox.computer.pids=1"], file=FILE)
    assert info.value.key_path == "computer.pids" and "--set" in str(info.value)
    with pytest.raises(ConfigError, match=r"computer\.bogus"):
        apply_sets(SPEC, ["sandbox.computer.bogus=1"], file=FILE)


def test_env_items_extend_the_environment() -> None:
    spec = apply_env(SPEC, ["A=1", "B=x=y"])
    assert spec.environment == {"A": "1", "B": "x=y"}
    with pytest.raises(UsageError):
        apply_env(SPEC, ["1BAD=x"])
