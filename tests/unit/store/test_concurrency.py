"""Many writers at once: SQLite queues them on its write lock, Postgres on row locks; none fails."""

from __future__ import annotations

import anyio

from orchestrator.store import FinishedTurn, NewMessage, Store
from orchestrator.stream import SessionEmitter
from tests.unit.store.factory import turn_events


async def test_concurrent_turns_on_many_sessions_all_land(store: Store) -> None:
    sessions = [await store.sessions.create("alice", "tests.echo", session_id=f"c{i}") for i in range(8)]

    async def run_session(session_id: str) -> None:
        emitter = SessionEmitter(session_id)
        for n in range(3):
            turn_id = f"{session_id}-t{n}"
            await store.memory.set("chat", session_id, "last_turn", turn_id)
            await store.persist_turn(
                FinishedTurn(
                    session_id=session_id,
                    turn_id=turn_id,
                    assistant_id="tests.echo",
                    status="completed",
                    messages=(NewMessage(id=f"{turn_id}-m", role="assistant", content=turn_id),),
                    events=tuple(turn_events(emitter, turn_id, f"answer {n}")),
                )
            )

    async with anyio.create_task_group() as tg:
        for session in sessions:
            tg.start_soon(run_session, session.id)

    for session in sessions:
        events = await store.events.after(session.id, limit=1000)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert [m.content for m in await store.messages.history(session.id)] == [
            f"{session.id}-t{n}" for n in range(3)
        ]
        assert await store.memory.get("chat", session.id, "last_turn") == f"{session.id}-t2"


async def test_concurrent_messages_on_one_session_get_distinct_sequences(store: Store) -> None:
    session = await store.sessions.create("alice", "tests.echo")

    async def add(i: int) -> None:
        await store.messages.add(session.id, f"t{i}", [NewMessage(id=f"m{i}", role="user", content=i)])

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(add, i)
    history = await store.messages.history(session.id, limit=100)
    assert [m.sequence for m in history] == list(range(1, 13))
    assert sorted(m.content for m in history if isinstance(m.content, int)) == list(range(12))
