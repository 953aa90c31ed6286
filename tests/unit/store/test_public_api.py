"""`orchestrator.store` exports a sorted, complete `__all__`; records are frozen and closed."""

from __future__ import annotations

import inspect

import pytest
from pydantic import BaseModel, ValidationError

from orchestrator import store
from orchestrator.errors import CageError
from orchestrator.store import records


def test_store_exports_are_sorted_and_complete() -> None:
    public = [n for n, v in vars(store).items() if not n.startswith("_") and not inspect.ismodule(v)]
    assert store.__all__ == sorted(public)


@pytest.mark.parametrize(
    "cls",
    [
        c
        for _, c in inspect.getmembers(records, inspect.isclass)
        if issubclass(c, BaseModel) and c.__module__ == records.__name__ and not c.__name__.startswith("_")
    ],
    ids=lambda c: c.__name__,
)
def test_records_are_frozen_and_closed(cls: type[BaseModel]) -> None:
    assert cls.model_config.get("frozen") is True
    assert cls.model_config.get("extra") == "forbid"


def test_records_cannot_be_changed() -> None:
    msg = store.NewMessage(id="m", role="user", content="hi")
    with pytest.raises(ValidationError):
        msg.content = "changed"  # type: ignore[misc]


def test_store_errors_are_cage_errors() -> None:
    for cls in (store.StoreError, store.EventSequenceError, store.RecordExists, store.RecordNotFound):
        assert issubclass(cls, CageError)
    err = store.EventSequenceError("s1", expected=5, got=9)
    assert str(err) == "event log of session s1: gap: expected seq 5, got 9"
