"""Every Cage error descends from CageError, names what is at fault, and declares a unique stable
code and a kind."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

from orchestrator import errors
from orchestrator.error_table import ERROR_MODULES, all_error_classes
from orchestrator.errors import (
    CageError,
    ConfigError,
    ConfigErrors,
    ErrorKind,
    PrepareError,
    RunnerError,
    error_class,
)


def _error_classes() -> list[type[BaseException]]:
    """Every exception class defined in a module of `ERROR_MODULES` (not only the ones imported)."""
    found: list[type[BaseException]] = []
    for name in ERROR_MODULES:
        module = importlib.import_module(name)
        found += [
            c
            for _, c in inspect.getmembers(module, inspect.isclass)
            if issubclass(c, BaseException) and c.__module__ == name
        ]
    return found


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_has_one_root(cls: type[BaseException]) -> None:
    assert issubclass(cls, CageError)


def test_every_error_appears_in_the_module_tree() -> None:
    """`orchestrator/errors.py`'s docstring is the one tree: every class, wherever it lives."""
    doc = errors.__doc__ or ""
    missing = [c.__name__ for c in all_error_classes() if c.__name__ not in doc]
    assert missing == []


ROOTLESS = {
    "_Interrupted": "orchestrator/pipeline/call_runner.py: control flow between a call's stages",
    "GatewayRefusal": "orchestrator/gateway/forwarding.py: answered as an HTTP error in the same module",
    "TsRuntimeError": "orchestrator/hooks_ts/runtime.py: its callers turn it into a HookError",
    "DriverError": "runners/opencode/incontainer/serve_driver.py: a standard-library script in the box",
    "LogMoved": "orchestrator/store/log_writer.py: the group commit writes the batch again, append by append",
    "_JobFailed": "orchestrator/store/events.py: the group commit writes the batch again, item by item",
    "Refused": "orchestrator/store/turn_writer.py: the turn's begin or end is written again by the ORM path",
    "WireError": "orchestrator/cli/forkwire.py: the fork server's wire (standard library only): a client "
    "that meets it runs in its own process, the server logs it and closes the connection",
}
"""The exception classes outside the tree, and why: none of them reaches a client, a turn's events
or the CLI's exit code as itself."""


def test_every_other_exception_class_is_a_cage_error() -> None:
    """An exception class anywhere in `orchestrator/` or `runners/` descends from a Cage error,
    unless it is one of the few that never leave their module (`ROOTLESS`)."""
    repo = Path(__file__).resolve().parents[2]
    known = {c.__name__ for c in all_error_classes()}
    outside: list[str] = []
    for root in (repo / "orchestrator", repo / "runners"):
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ClassDef):
                    continue
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                raises = any(b.endswith(("Error", "Exception")) for b in bases)
                if raises and not bases & known and node.name not in {*ROOTLESS, "CageError"}:
                    outside.append(f"{path.relative_to(repo)}: {node.name}")
    assert outside == []


def test_config_error_message_names_file_line_and_key() -> None:
    err = ConfigError(
        "cannot mix ints and objects",
        file=Path("assistants/coder/sandbox.yao"),
        key_path="computer.ports[1]",
        line=7,
    )
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


CODE = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_every_error_class_declares_its_own_code_and_has_a_kind(cls: type[CageError]) -> None:
    assert "code" in cls.__dict__, f"{cls.__qualname__} inherits {cls.code!r}: declare its own `code`"
    assert CODE.fullmatch(cls.code), cls.code
    assert isinstance(cls.kind, ErrorKind)


def test_error_codes_are_unique_and_resolve_to_their_class() -> None:
    classes = all_error_classes()
    codes = [c.code for c in classes]
    assert len(codes) == len(set(codes))
    assert all(error_class(c.code) is c for c in classes)
    assert error_class("runner_failed") is None  # a runner's own code is no class's


def test_a_taken_code_is_refused_at_class_creation() -> None:
    with pytest.raises(TypeError, match="'not_found' of Lost is taken by NotFound"):
        type("Lost", (CageError,), {"code": "not_found"})


def _defined_error_classes(root: Path) -> dict[str, str]:
    """`class X(<a known error class>)` anywhere under `root`: class name -> module."""
    known = {c.__name__ for c in all_error_classes()}
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if bases & known:
                    found[node.name] = module
    return found


def test_every_error_module_is_listed() -> None:
    """`all_error_classes` (docs, schema, these tests) sees every error class only if its module is
    in `ERROR_MODULES`."""
    repo = Path(__file__).resolve().parents[2]
    defined = _defined_error_classes(repo / "orchestrator") | _defined_error_classes(repo / "runners")
    unlisted = {name: module for name, module in defined.items() if module not in ERROR_MODULES}
    assert unlisted == {}
