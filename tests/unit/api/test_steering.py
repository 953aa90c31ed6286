"""Steering commands between two replicas on one Postgres database (two `Store`s, two `Steering`s).

The replica holding a session's turn carries out the command and its outcome reaches the sender:
success with its data, or its own refusal with the same error a local request raises. A command
nobody holds is withdrawn and refused. On SQLite steering is off (one process).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from orchestrator.api import steering as steering_module
from orchestrator.api.steering import Steering
from orchestrator.errors import NotFound, UsageError
from orchestrator.store import Store
from orchestrator.store.commands import TurnCommand
from tests.unit.store.conftest import FakeClock, database_url, postgres_url

__all__ = ["database_url", "postgres_url"]


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    st = Store.from_url(database_url, clock=FakeClock())
    await st.migrate()
    try:
        yield st
    finally:
        await st.aclose()


@pytest.fixture
async def owner_store(store: Store) -> AsyncIterator[Store]:
    """Replica A's store; the tests using it are marked `databases("postgres")` (several replicas
    share a Postgres database)."""
    other = Store.from_url(store.url)
    try:
        yield other
    finally:
        await other.aclose()


class Owner:
    """Replica A: holds the turn of `session_id` and records what it was asked."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.done: list[TurnCommand] = []

    def holds(self, session_id: str) -> bool:
        return session_id == self.session_id

    async def act(self, command: TurnCommand) -> dict[str, Any]:
        self.done.append(command)
        if command.body.get("request_id") == "gone":
            raise NotFound("no permission request 'gone' is waiting in this session")
        if command.body.get("request_id") == "a-question":
            raise UsageError("'a-question' is a question; answer it with its own frame or route")
        return {"turn_id": "turn-1"}


def _nobody(_session_id: str) -> bool:
    return False


async def _nothing(command: TurnCommand) -> dict[str, Any]:
    raise AssertionError(f"nobody holds {command.session_id}")


async def _pair(sender_store: Store, owner_store: Store, session_id: str) -> tuple[Steering, Owner]:
    owner = Owner(session_id)
    on_a = Steering(owner_store, holds=owner.holds, act=owner.act)
    on_b = Steering(sender_store, holds=_nobody, act=_nothing)
    on_a.listen()
    on_b.listen()
    with anyio.fail_after(30):
        await owner_store.notices.connected.wait()
        await sender_store.notices.connected.wait()
    return on_b, owner


@pytest.mark.databases("sqlite")
async def test_sqlite_steers_nothing(store: Store) -> None:
    steering = Steering(store, holds=_nobody, act=_nothing)
    steering.listen()
    assert not steering.enabled
    assert await steering.running_turn("any") is None


@pytest.mark.databases("postgres")
async def test_the_owner_acts_and_the_sender_gets_its_outcome(store: Store, owner_store: Store) -> None:
    session = await store.sessions.create("alice", "tests.echo")
    on_b, owner = await _pair(store, owner_store, session.id)
    with anyio.fail_after(30):
        done = await on_b.send(session.id, "interrupt", {"force": True}, refusal="no turn")
    assert done == {"turn_id": "turn-1"}
    assert [(c.kind, c.body) for c in owner.done] == [("interrupt", {"force": True})]
    assert await store.commands.unclaimed() == []  # the sender deleted its row


@pytest.mark.databases("postgres")
async def test_the_owners_refusal_reaches_the_sender_as_the_same_error(
    store: Store, owner_store: Store
) -> None:
    session = await store.sessions.create("alice", "tests.echo")
    on_b, _owner = await _pair(store, owner_store, session.id)
    with anyio.fail_after(30), pytest.raises(NotFound, match="no permission request 'gone' is waiting"):
        await on_b.send(session.id, "permission", {"request_id": "gone"}, refusal="unused")
    with anyio.fail_after(30), pytest.raises(UsageError, match="is a question"):
        await on_b.send(session.id, "permission", {"request_id": "a-question"}, refusal="unused")


@pytest.mark.databases("postgres")
async def test_a_command_nobody_holds_is_withdrawn_and_refused(
    store: Store, owner_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(steering_module, "CLAIM_WAIT_S", 0.5)
    session = await store.sessions.create("alice", "tests.echo")
    on_b, owner = await _pair(store, owner_store, "another-session")
    with anyio.fail_after(30), pytest.raises(NotFound, match="no turn is running here"):
        await on_b.send(session.id, "interrupt", {"force": False}, refusal="no turn is running here")
    assert owner.done == []
