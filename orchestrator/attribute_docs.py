"""The string under a model's field, as that field's description in the model's JSON schema.

Cage's models document each field with a docstring under it. pydantic's own
`use_attribute_docstrings` reads those from every model's source as the model is defined: about
85 ms of every CLI start (issue 14), though only JSON schemas use them (`cage schemas`, OpenAPI,
the input schemas of the native loop's tools). A model config with
`json_schema_extra=describe_fields` reads them when a schema is made instead, once per class, with
pydantic's rules: a field's docstring is the string statement right after its annotated
assignment, in the body of the class that annotates it (the nearest in the MRO), when that class's
config documents its fields; nested classes and functions are not looked into; a docstring wins
over the description of the field's type, and `Field(description=...)` over both.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from typing import Any

from pydantic import BaseModel


def describe_fields(schema: dict[str, Any], cls: type[Any]) -> None:
    """`json_schema_extra` of a model config: give each property of `schema` (the JSON schema of
    model `cls`) its field's docstring as its description, over the one its type brings; a field
    with `Field(description=...)` keeps that one."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        return
    for name, field in cls.model_fields.items():
        doc = None if field.description is not None else _docstring(cls, name)
        if doc is None:
            continue
        keys = {name, field.alias, field.serialization_alias}
        if isinstance(field.validation_alias, str):
            keys.add(field.validation_alias)
        for key in keys:
            prop = properties.get(key) if key else None
            if isinstance(prop, dict):
                prop["description"] = doc


def _docstring(cls: type[BaseModel], name: str) -> str | None:
    """The docstring of field `name`, from the nearest class of `cls`'s MRO that annotates it, if
    that class documents its fields."""
    for klass in cls.__mro__:
        if name in vars(klass).get("__annotations__", {}):
            config = getattr(klass, "model_config", {})
            if config.get("json_schema_extra") is not describe_fields:
                return None
            return _class_docstrings(klass).get(name)
    return None


@functools.cache
def _class_docstrings(klass: type) -> dict[str, str]:
    """Field name -> docstring, for the fields annotated in `klass`'s own body."""
    try:
        lines, _ = inspect.getsourcelines(klass)
    except (OSError, TypeError):
        return {}
    source = textwrap.dedent("".join(lines))
    if source.startswith((" ", "\t")):  # a string in the body less indented than the class
        source = "def _wrapper():\n" + "".join(lines)
    try:
        stmt = ast.parse(source).body[0]
    except SyntaxError:
        return {}
    if isinstance(stmt, ast.FunctionDef) and stmt.name == "_wrapper":
        stmt = stmt.body[0]
    if not isinstance(stmt, ast.ClassDef):
        return {}
    docs: dict[str, str] = {}
    for before, node in zip(stmt.body, stmt.body[1:], strict=False):
        if (
            isinstance(before, ast.AnnAssign)
            and isinstance(before.target, ast.Name)
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            docs[before.target.id] = inspect.cleandoc(node.value.value)
    return docs
