"""Protocol models built from values their producer already guarantees, without validating them again.

The `TurnBuilder` makes every event of a runner turn: several for each line a CLI prints. What it
passes in is typed already (props models, ids it made itself, literals from its own code), so
pydantic's validation can find nothing to reject, and it costs more than the rest of the builder.
`trusted(cls, **values)` makes the instance validation would make (the same `__dict__`, fields in
declaration order, the same set fields), and `trusted_copy` the one `model_copy(update=...)` would;
`tests/unit/stream/test_trusted.py` holds both to that for every model the builder makes. The
models stay the source of truth: fields and defaults are read from the class, and everything else
(parsing, the event log, schemas) still validates.
"""

from __future__ import annotations

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
    _set_dict(model, {**(_templates.get(cls) or _template(cls)), **values})
    _set_fields_set(model, set(values))
    _set_extra(model, None)
    _set_private(model, None)
    return model


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
