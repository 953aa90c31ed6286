from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.dsl import package_schema, sandbox_schema

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"


def _render(schema: dict[str, object]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


@pytest.mark.parametrize(
    ("name", "make"), [("sandbox-v2.json", sandbox_schema), ("package.json", package_schema)]
)
def test_checked_in_schema_is_current(name: str, make: object) -> None:
    assert callable(make)
    assert (SCHEMAS / name).read_text(encoding="utf-8") == _render(make()), "run `make schemas`"


def test_attribute_docstrings_become_descriptions() -> None:
    schema = sandbox_schema()
    computer = schema["$defs"]["ComputerSpec"]["properties"]
    assert "fork bomb" in computer["pids"]["description"]
    assert schema["properties"]["version"]["description"] == 'Must be "2.0" (Sandbox V2).'
    assert schema["additionalProperties"] is False
    package = package_schema()
    assert package["required"] == ["name"]
    assert "use::<role>" in package["properties"]["connector"]["description"]
