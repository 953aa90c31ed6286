"""Assistants created over the API: documents stored as given, replaced whole, listed per owner."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from orchestrator.store import RecordExists, RecordNotFound, Store
from tests.unit.store.conftest import FakeClock

PACKAGE: dict[str, JsonValue] = {"name": "Coder", "connector": "$ENV.MODEL", "options": {"temperature": 0.2}}
SANDBOX: dict[str, JsonValue] = {"version": "2.0", "runner": {"name": "claude"}, "computer": {"memory": "2G"}}
PROMPTS: list[JsonValue] = [{"role": "system", "content": "You write code."}]


async def test_create_get_replace_delete(store: Store, clock: FakeClock) -> None:
    created = await store.assistants.create(
        "team.coder", owner="alice", package=PACKAGE, prompts=PROMPTS, sandbox=SANDBOX
    )
    assert created.package == PACKAGE and created.sandbox == SANDBOX and created.prompts == PROMPTS
    assert await store.assistants.get("team.coder") == created

    clock.advance(60)
    replaced = await store.assistants.replace("team.coder", package={"name": "Coder 2"}, sandbox=None)
    assert replaced.package == {"name": "Coder 2"} and replaced.sandbox is None and replaced.prompts == []
    assert replaced.owner == "alice" and replaced.created_at == created.created_at
    assert replaced.updated_at == clock.now
    assert await store.assistants.get("team.coder") == replaced

    assert await store.assistants.delete("team.coder") is True
    assert await store.assistants.get("team.coder") is None
    assert await store.assistants.delete("team.coder") is False


async def test_ids_are_unique_and_missing_ones_are_reported(store: Store) -> None:
    await store.assistants.create("a.b", owner="alice", package=PACKAGE)
    with pytest.raises(RecordExists, match=r"a\.b"):
        await store.assistants.create("a.b", owner="bob", package={"name": "other"})
    with pytest.raises(RecordNotFound, match=r"x\.y"):
        await store.assistants.replace("x.y", package=PACKAGE)


async def test_list_by_owner(store: Store) -> None:
    await store.assistants.create("z.one", owner="alice", package=PACKAGE)
    await store.assistants.create("a.two", owner="bob", package=PACKAGE)
    await store.assistants.create("m.three", owner="alice", package=PACKAGE)
    assert [a.id for a in await store.assistants.list()] == ["a.two", "m.three", "z.one"]
    assert [a.id for a in await store.assistants.list(owner="alice")] == ["m.three", "z.one"]
