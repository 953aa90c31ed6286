"""`describe_fields`: the string under a field is its description in the JSON schema, with
pydantic's `use_attribute_docstrings` rules, read when the schema is made."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from orchestrator.attribute_docs import describe_fields

_DOCUMENTED = ConfigDict(json_schema_extra=describe_fields)
Seconds = Annotated[float, WithJsonSchema({"type": "number", "description": "the type's own words"})]


class Inner(BaseModel):
    model_config = _DOCUMENTED
    depth: int = 0
    """How deep."""


class Plain(BaseModel):
    """A parent that does not document its fields."""

    inherited: int = 0
    """Not a description: this class's config does not ask for one."""


class Documented(Plain):
    """The class's own docstring is no field's."""

    model_config = _DOCUMENTED
    name: str
    """The name.

    More lines, dedented."""
    explicit: str = Field("", description="from Field")
    """Loses to Field(description=...)."""
    wait: Seconds = 1.0
    """Beats the type's description."""
    aliased: int = Field(0, alias="Aliased")
    """Found under its alias."""
    inner: Inner = Inner()
    """A nested model."""
    _private: int = 0
    """A private attribute, not a field."""
    undocumented: int = 0

    class Nested:
        hidden: int = 0
        """A nested class's attribute, not this model's."""

    def method(self) -> None:
        local: int = 0
        """A function's statement, not this model's."""
        del local


def properties(model: type[BaseModel], mode: str = "validation") -> dict[str, dict[str, object]]:
    schema = model.model_json_schema(mode="validation" if mode == "validation" else "serialization")
    props: dict[str, dict[str, object]] = schema["properties"]
    return props


def test_a_fields_docstring_is_its_description() -> None:
    props = properties(Documented)
    assert props["name"]["description"] == "The name.\n\nMore lines, dedented."
    assert props["Aliased"]["description"] == "Found under its alias."
    assert props["inner"]["description"] == "A nested model."
    assert (
        Documented.model_json_schema()["$defs"]["Inner"]["properties"]["depth"]["description"] == "How deep."
    )


def test_field_description_wins_and_a_docstring_beats_the_types_description() -> None:
    props = properties(Documented)
    assert props["explicit"]["description"] == "from Field"
    assert props["wait"]["description"] == "Beats the type's description."


def test_no_description_without_a_docstring_or_from_an_undocumented_parent() -> None:
    props = properties(Documented)
    assert "description" not in props["undocumented"]
    assert "description" not in props["inherited"]
    assert set(props) == {"inherited", "name", "explicit", "wait", "Aliased", "inner", "undocumented"}


def test_a_model_made_in_a_function_is_read_from_its_indented_source() -> None:
    class Local(BaseModel):
        model_config = _DOCUMENTED
        count: int = 0
        """How many."""

    assert properties(Local, "serialization")["count"]["description"] == "How many."


def test_the_clis_models_are_not_read_from_source_at_import() -> None:
    """What the change is for: importing `cage run` parses no model's source (pydantic's
    `use_attribute_docstrings` did, for each model, as it was defined)."""
    probe = (
        "import ast, sys\n"
        "parsed = []\n"
        "real = ast.parse\n"
        "ast.parse = lambda *a, **k: parsed.append(1) or real(*a, **k)\n"
        "import orchestrator.cli.run\n"
        "print(len(parsed))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


_TWIN_BODY = '''
from typing import Annotated

from pydantic import BaseModel, Field, WithJsonSchema

Seconds = Annotated[float, WithJsonSchema({"type": "number", "description": "the type's own words"})]


class Base(BaseModel):
    model_config = CONFIG
    shared: int = 0
    """From the parent."""


class Inner(BaseModel):
    model_config = CONFIG
    depth: int = 0
    """How deep."""


class Model(Base):
    name: str
    """The name.

        Indented more."""
    explicit: str = Field("", description="from Field")
    """Loses to Field."""
    wait: Seconds = 1.0
    """Beats the type."""
    aliased: int = Field(0, alias="Aliased")
    """Under its alias."""
    inner: Inner | None = None
    """A nested model."""
    shared: int = 1
    undocumented: int = 0
'''


def test_the_same_schema_as_pydantics_own_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pydantic's `use_attribute_docstrings` is the oracle: the same models, documented either way,
    have the same JSON schemas in both modes."""
    configs = {
        "ours": "from orchestrator.attribute_docs import describe_fields\n"
        "from pydantic import ConfigDict\nCONFIG = ConfigDict(json_schema_extra=describe_fields)\n",
        "theirs": "from pydantic import ConfigDict\nCONFIG = ConfigDict(use_attribute_docstrings=True)\n",
    }
    for name, config in configs.items():
        (tmp_path / f"twin_{name}.py").write_text(config + _TWIN_BODY)
    monkeypatch.syspath_prepend(str(tmp_path))
    ours, theirs = importlib.import_module("twin_ours"), importlib.import_module("twin_theirs")
    for mode in ("validation", "serialization"):
        mine = ours.Model.model_json_schema(mode=mode)
        assert mine == theirs.Model.model_json_schema(mode=mode)
        assert mine["properties"]["wait"]["description"] == "Beats the type."
