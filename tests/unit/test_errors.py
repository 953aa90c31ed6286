"""Every Cage error descends from CageError and names what is at fault."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from orchestrator import errors
from orchestrator.errors import CageError, ConfigError, ConfigErrors, PrepareError, RunnerError


def _error_classes() -> list[type[BaseException]]:
    return [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, BaseException)]


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_has_one_root(cls: type[BaseException]) -> None:
    assert issubclass(cls, CageError)


def test_every_error_appears_in_the_module_tree() -> None:
    doc = errors.__doc__ or ""
    missing = [c.__name__ for c in _error_classes() if c.__name__ not in doc and c is not ConfigErrors]
    assert missing == []


def test_config_error_message_names_file_line_and_key() -> None:
    err = ConfigError("cannot mix ints and objects", file=Path("assistants/coder/sandbox.yao"),
                      key_path="computer.ports[1]", line=7)
    assert str(err) == "assistants/coder/sandbox.yao:7: computer.ports[1]: cannot mix ints and objects"


def test_config_errors_lists_all() -> None:
    a = ConfigError("bad", file="a.yao", key_path="x")
    b = ConfigError("worse", file="b.yao", key_path="y")
    err = ConfigErrors([a, b])
    assert str(err) == "a.yao: x: bad\nb.yao: y: worse"
    assert err.errors == [a, b]


def test_runner_and_prepare_errors_carry_their_fields() -> None:
    r = RunnerError("claude", "model refused", exit_code=1, stderr_tail="401")
    assert (r.runner, r.exit_code) == ("claude", 1)
    assert str(r) == "runner claude (exit 1): model refused: 401"
    p = PrepareError("box1", 2, "exit 127", "sh: nope: not found")
    assert p.step == 2
    assert "prepare[2]" in str(p) and "nope" in str(p)
