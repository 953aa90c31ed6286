"""Protocol models built from values their producer already guarantees, without validating them again.

The `TurnBuilder` makes every event of a runner turn: several for each line a CLI prints. What it
passes in is typed already (props models, ids it made itself, literals from its own code), so
pydantic's validation can find nothing to reject, and it costs more than the rest of the builder.
`trusted(cls, **values)` makes the instance validation would make (the same `__dict__`, fields in
declaration order, the same set fields), `maker(cls, *names)` a constructor that makes the same for
one fixed set of fields, for a call site that runs once per event, and `trusted_copy` the instance
`model_copy(update=...)` would; `tests/unit/stream/test_trusted.py` holds them to that for every
model the builder makes. The
models stay the source of truth: fields and defaults are read from the class, and everything else
(parsing, the event log, schemas) still validates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, JsonValue, TypeAdapter

M = TypeVar("M", bound=BaseModel)

_new = object.__new__
# The slots every model instance has, set through their descriptors: `object.__setattr__` would
# look each one up by name on every call, and these run twice per event.
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_templates: dict[type[BaseModel], dict[str, Any]] = {}
_JSON_VALUE: TypeAdapter[JsonValue] = TypeAdapter(JsonValue)


def _template(cls: type[BaseModel]) -> dict[str, Any]:
    """Every field of `cls` in declaration order, with its default. A required field maps to the
    class itself, a value no field holds, so a caller that forgets one fails the tests."""
    template: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        if field.default_factory is not None:
            raise TypeError(f"{cls.__name__}.{name}: trusted() shares defaults, so it takes no factories")
        template[name] = cls if field.is_required() else field.default
    _templates[cls] = template
    return template


def trusted(cls: type[M], /, **values: Any) -> M:
    """An instance of `cls` holding `values` (already valid) and the defaults of the other fields."""
    model = _new(cls)
    fields = (_templates.get(cls) or _template(cls)).copy()  # a block copy, then the given values
    fields.update(values)
    _set_dict(model, fields)
    _set_fields_set(model, set(values))
    _set_extra(model, None)
    _set_private(model, None)
    return model


def maker(cls: type[M], /, *names: str, **fixed: Any) -> Callable[..., M]:
    """A constructor of `cls` taking the values of `names` positionally (already valid), with the
    fields in `fixed` set to those values and the others to their defaults: what
    `trusted(cls, **dict(zip(names, values)), **fixed)` makes, for less.

    For a call site that runs once per event: the constructor is compiled once, copies a template
    already holding the defaults and `fixed` (a dict copy is a block copy; a dict display or a
    merge inserts key by key), stores the given values, and sets the given fields as one set
    display (a new set each call: `model_copy` updates its copy of it).
    """
    fields = cls.model_fields
    given = (*names, *fixed)
    if len(set(given)) != len(given) or any(name not in fields for name in given):
        raise TypeError(f"{cls.__name__}: unknown or repeated fields {given}")
    template = {**(_templates.get(cls) or _template(cls)), **fixed}
    missing = [name for name, value in template.items() if value is cls and name not in names]
    if missing:
        raise TypeError(f"{cls.__name__}: required fields not given: {missing}")
    scope: dict[str, Any] = {
        "_cls": cls,
        "_copy": template.copy,
        "_new": _new,
        "_set_dict": _set_dict,
        "_set_fields_set": _set_fields_set,
        "_set_extra": _set_extra,
        "_set_private": _set_private,
    }
    params = ", ".join(f"a{i}" for i in range(len(names)))
    stores = "".join(f"    values[{name!r}] = a{i}\n" for i, name in enumerate(names))
    fields_set = "{" + ", ".join(repr(name) for name in given) + "}" if given else "set()"
    source = (
        f"def make({params}):\n"
        "    values = _copy()\n"
        f"{stores}"
        "    model = _new(_cls)\n"
        "    _set_dict(model, values)\n"
        f"    _set_fields_set(model, {fields_set})\n"
        "    _set_extra(model, None)\n"
        "    _set_private(model, None)\n"
        "    return model\n"
    )
    exec(source, scope)  # made above from field names (identifiers) and numbers only
    made: Callable[..., M] = scope["make"]
    return made


def trusted_copy(model: M, /, **changes: Any) -> M:
    """`model.model_copy(update=changes)` (a shallow copy, `changes` already valid), for less."""
    copy = _new(type(model))
    _set_dict(copy, {**model.__dict__, **changes})
    _set_fields_set(copy, model.__pydantic_fields_set__.union(changes))
    _set_extra(copy, None)
    _set_private(copy, None)
    return copy


def checked_json(value: JsonValue) -> JsonValue:
    """A JSON value from outside (a tool input a CLI sent) checked and copied, as validating a
    `JsonValue` field would, for the props `trusted` builds around it."""
    return None if value is None else _JSON_VALUE.validate_python(value)
