"""`ctx.memory`: each space bound to the right scope; TTL; `context` dies with the turn."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orchestrator.errors import Forbidden
from orchestrator.store import Store
from tests.pipeline_rig import Rig
from tests.unit.store.conftest import FakeClock


async def memory(rig: Rig, ops: list[dict[str, Any]], **kw: Any) -> list[Any]:
    ran = await rig.run("hooks.memory", json.dumps(ops), **kw)
    assert ran.result.status == "completed", ran.result.error
    result: list[Any] = json.loads(ran.result.content)
    return result


async def test_user_space_belongs_to_its_owner(rig: Rig) -> None:
    await memory(rig, [{"op": "set", "space": "user", "key": "color", "value": "blue"}], owner="alice")
    assert await memory(rig, [{"op": "get", "space": "user", "key": "color"}], owner="alice") == ["blue"]
    assert await memory(rig, [{"op": "get", "space": "user", "key": "color"}], owner="bob") == [None]
    assert await memory(rig, [{"op": "has", "space": "user", "key": "color"}], owner="bob") == [False]


async def test_session_space_is_shared_by_the_turns_of_one_session_only(rig: Rig) -> None:
    set_op = [{"op": "set", "space": "chat", "key": "topic", "value": {"n": 1}}]
    await memory(rig, set_op, session_id="chat-m1")
    assert await memory(rig, [{"op": "get", "space": "chat", "key": "topic"}], session_id="chat-m1") == [
        {"n": 1}
    ]
    assert await memory(rig, [{"op": "get", "space": "chat", "key": "topic"}], session_id="chat-m2") == [None]


async def test_team_space_is_shared_by_members_of_the_team(rig: Rig, store: Store) -> None:
    await store.teams.add("team-7", "alice")
    await store.teams.add("team-7", "bob")
    await memory(rig, [{"op": "set", "space": "team", "key": "k", "value": 1}], owner="alice")
    assert await memory(rig, [{"op": "get", "space": "team", "key": "k"}], owner="bob") == [1]
    # an owner in no team has a team space of its own, even one named like a team
    assert await memory(rig, [{"op": "get", "space": "team", "key": "k"}], owner="carol") == [None]
    await store.teams.add("alice", "dave")  # a team that shares a name with an owner
    assert await memory(rig, [{"op": "get", "space": "team", "key": "k"}], owner="dave") == [None]


async def test_team_metadata_only_picks_among_the_owners_own_teams(rig: Rig, store: Store) -> None:
    await store.teams.add("red", "alice")
    await store.teams.add("blue", "alice")
    await memory(
        rig,
        [{"op": "set", "space": "team", "key": "k", "value": "b"}],
        owner="alice",
        metadata={"team_id": "red"},
    )
    first = await memory(rig, [{"op": "get", "space": "team", "key": "k"}], owner="alice")
    assert first == [None]  # without metadata: blue, the first of alice's teams
    with pytest.raises(Forbidden, match="not a member of team 'blue'"):
        await rig.run("hooks.memory", "[]", owner="mallory", metadata={"team_id": "blue"})


async def test_context_space_dies_with_the_turn(rig: Rig, store: Store) -> None:
    ops = [
        {"op": "set", "space": "context", "key": "scratch", "value": "tmp"},
        {"op": "get", "space": "context", "key": "scratch"},
    ]
    ran = await rig.run("hooks.memory", json.dumps(ops), session_id="chat-ctx")
    assert json.loads(ran.result.content) == [True, "tmp"]
    assert await store.memory.keys("context", ran.turn.turn_id) == []
    again = await memory(rig, [{"op": "get", "space": "context", "key": "scratch"}], session_id="chat-ctx")
    assert again == [None]


async def test_ttl_expires_and_keys_delete_work(rig: Rig, clock: FakeClock) -> None:
    ops = [
        {"op": "set", "space": "user", "key": "short", "value": 1, "ttl": 60},
        {"op": "set", "space": "user", "key": "long", "value": 2},
        {"op": "keys", "space": "user"},
    ]
    assert (await memory(rig, ops))[-1] == ["long", "short"]
    clock.advance(61)
    after = [
        {"op": "get", "space": "user", "key": "short"},
        {"op": "delete", "space": "user", "key": "long"},
        {"op": "keys", "space": "user"},
    ]
    assert await memory(rig, after) == [None, True, []]
