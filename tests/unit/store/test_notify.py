"""Notices between processes on one Postgres database, and the steering commands they carry.

Two `Store`s on one database stand for two replicas: what one writes, the other's listener hears,
only after the writer's transaction committed, and in commit order. On SQLite nothing listens.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from orchestrator.store import Store
from orchestrator.store.events import notice, parse_notice
from orchestrator.store.notify import COMMANDS_CHANNEL, EVENTS_CHANNEL, OUTCOMES_CHANNEL
from orchestrator.stream import SessionEmitter
from tests.unit.store.factory import turn_events


@pytest.fixture
async def other(store: Store) -> AsyncIterator[Store]:
    """A second store on the same database (another replica)."""
    second = Store.from_url(store.url)
    try:
        yield second
    finally:
        await second.aclose()


def test_an_events_notice_names_the_session_and_its_last_seq() -> None:
    assert parse_notice(notice("session 1", 42)) == ("session 1", 42)
    assert parse_notice("no-seq") is None
    assert parse_notice("session x") is None


@pytest.mark.databases("sqlite")
async def test_sqlite_has_no_listener(store: Store) -> None:
    heard: list[str] = []
    store.notices.listen(EVENTS_CHANNEL, heard.append)
    assert not store.notices.enabled
    session = await store.sessions.create("alice", "tests.echo")
    await store.events.append(session.id, turn_events(SessionEmitter(session.id), "t1", "hello"))
    assert heard == []


async def _listening(store: Store, channel: str) -> asyncio.Queue[str]:
    heard: asyncio.Queue[str] = asyncio.Queue()
    store.notices.listen(channel, heard.put_nowait)
    await asyncio.wait_for(store.notices.connected.wait(), 30)
    return heard


@pytest.mark.databases("postgres")
async def test_every_append_wakes_the_other_replica_after_its_commit(store: Store, other: Store) -> None:
    heard = await _listening(other, EVENTS_CHANNEL)
    session = await store.sessions.create("alice", "tests.echo")
    emitter = SessionEmitter(session.id)
    first = turn_events(emitter, "t1", "hello")
    second = turn_events(emitter, "t2", "again")
    await store.events.append(session.id, first)
    await store.events.append(session.id, second)
    got = [parse_notice(await asyncio.wait_for(heard.get(), 30)) for _ in range(2)]
    assert got == [(session.id, first[-1].seq), (session.id, second[-1].seq)]
    # Delivered after the commit: the other replica reads every event the notice names.
    assert [e.seq for e in await other.events.after(session.id, 0)] == list(range(1, second[-1].seq + 1))


@pytest.mark.databases("postgres")
async def test_a_batch_of_several_sessions_sends_one_notice_per_session(store: Store, other: Store) -> None:
    heard = await _listening(other, EVENTS_CHANNEL)
    sessions = [await store.sessions.create("alice", "tests.echo") for _ in range(3)]
    batches = [turn_events(SessionEmitter(c.id), "t", "x") for c in sessions]
    await asyncio.gather(*(store.events.append(c.id, b) for c, b in zip(sessions, batches, strict=True)))
    got = {parse_notice(await asyncio.wait_for(heard.get(), 30)) for _ in sessions}
    assert got == {(c.id, b[-1].seq) for c, b in zip(sessions, batches, strict=True)}


async def test_a_command_is_claimed_once_and_its_outcome_reaches_the_sender(
    store: Store, other: Store
) -> None:
    session = await store.sessions.create("alice", "tests.echo")
    if store.dialect == "postgresql":
        commands = await _listening(other, COMMANDS_CHANNEL)
        outcomes = await _listening(store, OUTCOMES_CHANNEL)
    command_id = await store.commands.send(session.id, "interrupt", {"force": True})
    if store.dialect == "postgresql":
        assert await asyncio.wait_for(commands.get(), 30) == str(command_id)
    assert [c.id for c in await other.commands.unclaimed()] == [command_id]
    assert await other.commands.claim(command_id, "replica-a")
    assert not await store.commands.claim(command_id, "replica-b")  # one claimant, ever
    assert not await store.commands.withdraw(command_id, {"error": "not_found"})  # claimed: too late
    await other.commands.finish(command_id, {"ok": True})
    if store.dialect == "postgresql":
        assert await asyncio.wait_for(outcomes.get(), 30) == str(command_id)
    got = await store.commands.get(command_id)
    assert got is not None and got.outcome == {"ok": True} and got.claimed_by == "replica-a"
    assert got.body == {"force": True} and got.kind == "interrupt"
    await store.commands.forget(command_id)
    assert await store.commands.get(command_id) is None


async def test_a_withdrawn_command_is_never_claimed(store: Store) -> None:
    session = await store.sessions.create("alice", "tests.echo")
    command_id = await store.commands.send(session.id, "permission", {"request_id": "r1"})
    assert await store.commands.withdraw(command_id, {"error": "not_found"})
    assert not await store.commands.claim(command_id, "late-replica")
    assert await store.commands.unclaimed() == []
