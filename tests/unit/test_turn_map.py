"""docs/architecture.md's "A turn, end to end" names a module and a function per hop; each exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\| *(\d+) *\|[^|]*\| *`([^`]+\.py)` *\| *`([\w.]+)` *\|$")
NAMED = re.compile(r"`([\w.]+)` \(`([^`]+\.py)`\)")


def _section() -> str:
    text = DOC.read_text()
    start = text.index("## A turn, end to end")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _hops() -> list[tuple[int, str, str]]:
    return [(int(m[1]), m[2], m[3]) for m in map(ROW.match, _section().splitlines()) if m]


def _named() -> list[tuple[str, str]]:
    """Every "`name` (`path.py`)" in the section's prose: the four types, the other modes."""
    return [(m[2], m[1]) for m in NAMED.finditer(_section())]


def _defines(path: Path, qualname: str) -> bool:
    """True when the module defines `qualname` (`f`, `Class` or `Class.method`)."""
    body: list[ast.stmt] = ast.parse(path.read_text()).body
    for part in qualname.split("."):
        found = next(
            (
                node
                for node in body
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and node.name == part
            ),
            None,
        )
        if found is None:
            return False
        body = found.body
    return True


def test_the_map_is_at_most_twelve_hops_in_order_and_four_types() -> None:
    numbers = [number for number, _, _ in _hops()]
    assert numbers == list(range(1, len(numbers) + 1))
    assert 8 <= len(numbers) <= 12
    assert {"TurnInput", "Call", "TurnRequest", "CallResult"} <= {name for _, name in _named()}


@pytest.mark.parametrize(("number", "module", "name"), _hops(), ids=lambda v: str(v))
def test_every_hop_names_a_function_that_exists(number: int, module: str, name: str) -> None:
    path = ROOT / module
    assert path.is_file(), f"hop {number}: no module {module}"
    assert _defines(path, name), f"hop {number}: {module} defines no {name}"


@pytest.mark.parametrize(("module", "name"), _named(), ids=lambda v: str(v))
def test_every_type_and_mode_in_the_prose_exists(module: str, name: str) -> None:
    path = ROOT / module
    assert path.is_file(), f"no module {module}"
    assert _defines(path, name), f"{module} defines no {name}"
