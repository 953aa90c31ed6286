"""Revision 0008 (`chats` becomes `sessions`, `chat_id` columns `session_id`): a database made at 0007
with sessions in it keeps every row (a child session, turns, messages, the event log, a steering
command, a turn lease), the store reads them all under the new names, the foreign keys still
cascade, and a downgrade to 0007 gives the old names back with the data."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from orchestrator.store import Store
from orchestrator.store.migration import current_revision, downgrade, schema_diff, upgrade
from orchestrator.store.schema_version import HEAD_REVISION

WHEN = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
BEFORE = "0007_ws_tickets"

ROWS_AT_0007 = [
    (
        "INSERT INTO chats (id, owner, client_id, parent_id, assistant_id, title, created_at, updated_at,"
        " last_seq, metadata, resume) VALUES (:id, 'alice', :client, :parent, 'tests.echo', 'old', :when,"
        " :when, :seq, '{}', '{}')",
        [
            {"id": "p-internal", "client": "parent", "parent": None, "seq": 2},
            {"id": "c-internal", "client": "child", "parent": "p-internal", "seq": 0},
        ],
    ),
    (
        "INSERT INTO turns (id, chat_id, assistant_id, status, usage, created_at)"
        " VALUES ('t-1', 'p-internal', 'tests.echo', 'running', '{}', :when)",
        [{}],
    ),
    (
        "INSERT INTO messages (id, chat_id, turn_id, role, content, assistant_id, created_at, sequence)"
        " VALUES ('m-1', 'p-internal', 't-1', 'user', '\"hi\"', NULL, :when, 1)",
        [{}],
    ),
    (
        "INSERT INTO events (session_id, seq, turn_id, type, payload, ts)"
        " VALUES ('p-internal', :seq, 't-1', 'stream_start', '{}', 0)",
        [{"seq": 1}, {"seq": 2}],
    ),
    (
        "INSERT INTO turn_commands (chat_id, kind, body, claimed_by, outcome, created_at)"
        " VALUES ('p-internal', 'interrupt', '{}', NULL, NULL, :when)",
        [{}],
    ),
    (
        "INSERT INTO replicas (id, host, pid, started_at, expires_at) VALUES ('r-1', 'h', 1, :when, :when)",
        [{}],
    ),
    (
        "INSERT INTO turn_leases (turn_id, chat_id, replica_id, expires_at, created_at)"
        " VALUES ('t-1', 'p-internal', 'r-1', :when, :when)",
        [{}],
    ),
]


async def _run(url: str, statements: list[tuple[str, list[dict[str, object]]]]) -> None:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.begin() as conn:
            for sql, rows in statements:
                for row in rows:
                    await conn.execute(text(sql), {"when": WHEN, **row})
    finally:
        await engine.dispose()


async def _scalar(url: str, sql: str) -> object:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            return (await conn.execute(text(sql))).scalar_one()
    finally:
        await engine.dispose()


async def _columns(url: str, table: str) -> set[str]:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            found = await conn.run_sync(lambda c: inspect(c).get_columns(table))
            return {column["name"] for column in found}
    finally:
        await engine.dispose()


async def test_a_0007_database_keeps_every_row_under_the_new_names(database_url: str) -> None:
    url = make_url(database_url)
    await upgrade(url, BEFORE)
    await _run(database_url, ROWS_AT_0007)

    async with Store.from_url(database_url) as store:
        await store.migrate()
        assert await current_revision(url) == HEAD_REVISION
        assert await schema_diff(url) == []
        parent = await store.sessions.require("p-internal")
        assert (parent.owner, parent.client_id, parent.title, parent.last_seq) == (
            "alice",
            "parent",
            "old",
            2,
        )
        [child] = await store.sessions.list("alice", parent_id="p-internal")
        assert (child.id, child.client_id) == ("c-internal", "child")
        assert [m.content for m in await store.messages.history("p-internal")] == ["hi"]
        assert [t.id for t in await store.turns.of_session("p-internal")] == ["t-1"]
        assert await store.events.last_seq("p-internal") == 2
        assert await store.commands.turn_of("p-internal") == "t-1"  # its running row, read by session_id
        assert (
            await _scalar(database_url, "SELECT count(*) FROM turn_commands WHERE session_id = 'p-internal'")
            == 1
        )
        assert (
            await _scalar(database_url, "SELECT session_id FROM turn_leases WHERE turn_id = 't-1'")
            == "p-internal"
        )

        # the renamed foreign keys still cascade from the renamed table
        assert await store.sessions.delete("p-internal")
        for table in ("sessions", "turns", "messages", "events", "turn_commands", "turn_leases"):
            assert await _scalar(database_url, f"SELECT count(*) FROM {table}") == 0, table


async def test_a_downgrade_to_0007_gives_the_old_names_back_with_the_rows(database_url: str) -> None:
    url = make_url(database_url)
    await upgrade(url, BEFORE)
    await _run(database_url, ROWS_AT_0007)
    await upgrade(url)

    await downgrade(url, BEFORE)
    assert await current_revision(url) == BEFORE
    assert {"id", "client_id", "parent_id"} <= await _columns(database_url, "chats")
    for table in ("turns", "turn_commands", "messages", "turn_leases"):
        assert "chat_id" in await _columns(database_url, table), table
    assert await _scalar(database_url, "SELECT count(*) FROM chats") == 2
    assert await _scalar(database_url, "SELECT count(*) FROM events WHERE session_id = 'p-internal'") == 2
    assert await _scalar(database_url, "SELECT chat_id FROM messages WHERE id = 'm-1'") == "p-internal"

    await upgrade(url)  # and up again: the same schema as a fresh database
    assert await schema_diff(url) == []
    assert await _scalar(database_url, "SELECT count(*) FROM sessions") == 2
