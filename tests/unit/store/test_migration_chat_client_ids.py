"""Revision 0003 (chat ids per owner): a database made at 0002 with chats in it keeps every chat, its
turns, messages and event log, each chat reachable under the id its owner knew."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from orchestrator.store import Store
from orchestrator.store.migration import current_revision, schema_diff, upgrade
from orchestrator.store.schema_version import HEAD_REVISION

WHEN = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
OLD_SESSIONS = [("alice", "shared-name"), ("bob", "bob-1"), ("alice", "a" * 64)]


async def _fill_at_0002(url: str) -> None:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.begin() as conn:
            for owner, session_id in OLD_SESSIONS:
                await conn.execute(
                    text(
                        "INSERT INTO chats (id, owner, assistant_id, title, created_at, updated_at, last_seq,"
                        " metadata, resume) VALUES (:id, :owner, 'tests.echo', 'old', :when, :when, 2, '{}',"
                        ' \'{"claude": "s-1"}\')'
                    ),
                    {"id": session_id, "owner": owner, "when": WHEN},
                )
                await conn.execute(
                    text(
                        "INSERT INTO turns (id, chat_id, assistant_id, status, usage, created_at)"
                        " VALUES (:turn, :id, 'tests.echo', 'completed', '{}', :when)"
                    ),
                    {"turn": f"t-{session_id[:20]}", "id": session_id, "when": WHEN},
                )
                await conn.execute(
                    text(
                        "INSERT INTO messages (id, chat_id, turn_id, role, content, assistant_id, created_at,"
                        " sequence) VALUES (:msg, :id, :turn, 'user', '\"hi\"', NULL, :when, 1)"
                    ),
                    {
                        "msg": f"m-{session_id[:20]}",
                        "id": session_id,
                        "turn": f"t-{session_id[:20]}",
                        "when": WHEN,
                    },
                )
                for seq in (1, 2):
                    await conn.execute(
                        text(
                            "INSERT INTO events (session_id, seq, turn_id, type, payload, ts)"
                            " VALUES (:id, :seq, :turn, 'stream_start', '{}', 0)"
                        ),
                        {"id": session_id, "seq": seq, "turn": f"t-{session_id[:20]}"},
                    )
    finally:
        await engine.dispose()


async def _count(url: str, table: str) -> int:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            return int((await conn.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one())
    finally:
        await engine.dispose()


async def test_a_0002_database_keeps_every_session_under_its_old_id(database_url: str) -> None:
    url = make_url(database_url)
    await upgrade(url, "0002_teams")
    await _fill_at_0002(database_url)

    async with Store.from_url(database_url) as store:
        await store.migrate()
        assert await current_revision(url) == HEAD_REVISION  # 0003 and every revision after it
        assert await schema_diff(url) == []
        for owner, session_id in OLD_SESSIONS:
            session = await store.sessions.require(session_id)
            assert (session.owner, session.client_id, session.parent_id) == (owner, session_id, None)
            assert (session.title, session.last_seq, session.resume) == ("old", 2, {"claude": "s-1"})
            assert await store.events.last_seq(session_id) == 2
            assert [m.content for m in await store.messages.history(session_id)] == ["hi"]
            assert [t.status for t in await store.turns.of_session(session_id)] == ["completed"]
        assert await _count(database_url, "events") == 2 * len(OLD_SESSIONS)

        # the children still reference the rebuilt table: deleting a chat cascades into its log
        assert await store.sessions.delete("bob-1")
        assert await _count(database_url, "events") == 2 * (len(OLD_SESSIONS) - 1)
        assert await _count(database_url, "messages") == len(OLD_SESSIONS) - 1


async def test_a_child_session_goes_with_its_parent(store: Store) -> None:
    parent = await store.sessions.create("alice", "tests.echo", session_id="parent")
    child = await store.sessions.create("alice", "tests.echo", parent_id=parent.id)
    assert child.parent_id == parent.id
    assert await store.sessions.delete(parent.id)
    assert await store.sessions.get(child.id) is None
