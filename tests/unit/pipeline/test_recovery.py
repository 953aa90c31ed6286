"""M5: a turn the process died in is closed on the next start, and the session goes on.

The crash is made the way a `kill -9` leaves things: a turn started through the real pipeline
(its `running` row and the user's message written at start, its first events in the log) whose
process never wrote its end. Recovery runs on the same database, as the next server start does.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from orchestrator.pipeline.recovery import RESTARTED, close_unfinished_turns
from orchestrator.pipeline.service import CRASHED
from orchestrator.store import Store, StoreError
from orchestrator.store.events import Committed
from orchestrator.stream import (
    ErrorEvent,
    LifecycleEvent,
    MessageEnd,
    MessageStart,
    StreamEnd,
    StreamStart,
    validate_stream,
)
from tests.pipeline_rig import Rig


async def crashed_turn(rig: Rig, store: Store, session_id: str) -> str:
    """A turn that got as far as an open text window, then lost its process."""
    turn = rig.turn("hooks.echo", "remember the milk", session_id=session_id)
    await store.sessions.create("alice", "hooks.echo", session_id=session_id)
    await store.turns.begin(session_id, turn.turn_id, "hooks.echo", ())
    await rig.service.hub.publish(
        session_id,
        turn.turn_id,
        [
            LifecycleEvent(props=StreamStart(assistant_id="hooks.echo")),
            LifecycleEvent(props=MessageStart(message_id="m1", type="text")),
        ],
    )
    return turn.turn_id


async def test_an_unfinished_turn_is_closed_and_the_session_goes_on(rig: Rig, store: Store) -> None:
    turn_id = await crashed_turn(rig, store, "chat-crashed")
    assert [t.id for t in await store.turns.unfinished()] == [turn_id]

    closed = await close_unfinished_turns(store)
    assert [(t.turn_id, t.session_id, t.assistant_id, t.owner) for t in closed] == [
        (turn_id, "chat-crashed", "hooks.echo", "alice")
    ]
    assert await close_unfinished_turns(store) == []  # a second start finds nothing to close

    log = await store.events.after("chat-crashed")
    assert not validate_stream(log), validate_stream(log)
    tail = log[-3:]
    assert isinstance(tail[0], LifecycleEvent) and isinstance(tail[0].props, MessageEnd)
    assert tail[0].props.status == "error"
    assert isinstance(tail[1], ErrorEvent) and tail[1].props.code == RESTARTED
    assert isinstance(tail[2], LifecycleEvent) and isinstance(tail[2].props, StreamEnd)
    assert tail[2].props.status == "error" and tail[2].thread_id is None
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    assert (await store.turns.get(turn_id)).status == "error"  # type: ignore[union-attr]

    ran = await rig.run("hooks.echo", "again", session_id="chat-crashed")
    assert ran.result.status == "completed" and ran.texts() == ["echo: again"]
    assert ran.events[0].seq == log[-1].seq + 1


async def test_a_turn_writes_its_running_row_and_the_users_message_at_start(rig: Rig, store: Store) -> None:
    turn = rig.turn("hooks.slow", "take your time", session_id="chat-slow")
    handle = await rig.service.start(turn)
    try:
        record = await store.turns.get(turn.turn_id)
        assert record is not None and record.status == "running"
        assert [(m.role, m.content) for m in record.messages] == [("user", "take your time")]
    finally:
        await handle.interrupt(force=True)
        await handle.result()
    record = await store.turns.get(turn.turn_id)
    assert record is not None and record.status == "cancelled"
    assert [m.role for m in record.messages] == ["user"]  # written once, not again at the end


async def test_a_store_failure_mid_turn_still_ends_the_stream(
    rig: Rig, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write failing outside the stages' own handling (SQLite busy past its timeout, seen in the
    soak) used to end the task with no `stream_end`: clients waited for ever."""
    real = store.events.append
    failures = [StoreError("database unavailable (OperationalError: database is locked)")]

    async def flaky(session_id: str, events: Any, *, committed: Committed | None = None) -> int:
        if failures:
            raise failures.pop()
        return await real(session_id, events, committed=committed)

    monkeypatch.setattr(store.events, "append", flaky)
    handle = await rig.service.start(rig.turn("hooks.echo", "hi", session_id="chat-flaky"))
    with anyio.fail_after(10):
        events = [e async for e in handle.events()]
        result = await handle.result()
    assert result.status == "error" and result.error == CRASHED
    end = events[-1]
    assert (
        isinstance(end, LifecycleEvent) and isinstance(end.props, StreamEnd) and end.props.status == "error"
    )
    ran = await rig.run("hooks.echo", "again", session_id="chat-flaky")  # the session goes on
    assert ran.result.status == "completed"
