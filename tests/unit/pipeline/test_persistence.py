"""Persistence and the session log: turns survive a restart, seq continues, subscribers get no gap
and no duplicate, one turn at a time per session, owners are kept apart."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskGroup

from orchestrator.errors import Conflict, NotFound
from orchestrator.pipeline import PipelineService
from orchestrator.store import Store
from orchestrator.stream import dump_event, validate_stream
from tests.fakes.assistants import write_assistant
from tests.pipeline_rig import Rig
from tests.unit.sandbox.fakes import FakeBackend
from tests.unit.store.conftest import FakeClock


async def test_turns_survive_a_restart_and_read_back_identical(
    rig: Rig,
    database_url: str,
    clock: FakeClock,
    backend: FakeBackend,
    app_root: Path,
    tmp_path: Path,
    turn_tasks: TaskGroup,
) -> None:
    first = await rig.run("hooks.echo", "remember me", session_id="chat-p")
    await rig.service.aclose()
    await rig.store.aclose()

    store = Store.from_url(database_url, clock=clock)
    try:
        logged = await store.events.after("chat-p")
        assert [dump_event(e) for e in logged] == [dump_event(e) for e in first.events]
        history = await store.messages.history("chat-p")
        assert [(m.role, m.content, m.assistant_id) for m in history] == [
            ("user", "remember me", None),
            ("assistant", "echo: remember me", "hooks.echo"),
        ]
        [turn] = await store.turns.of_session("chat-p")
        assert turn.id == first.turn.turn_id and turn.status == "completed"

        write_assistant(
            app_root,
            "hooks.count",
            hooks="async def create(ctx, messages, options):\n    await ctx.send(str(len(messages)))\n",
        )
        again = Rig.build(app_root, store, backend, tasks=turn_tasks, data_dir=tmp_path / "data2")
        second = await again.run("hooks.count", "and now?", session_id="chat-p")
        assert second.result.content == "3"  # the history came back from the store
        assert second.events[0].seq == first.events[-1].seq + 1
        everything = await store.events.after("chat-p")
        assert validate_stream(everything) == []
        await again.service.aclose()
    finally:
        await store.aclose()


async def test_history_size_from_options_and_skip(rig: Rig, app_root: Path) -> None:
    write_assistant(
        app_root,
        "hooks.count",
        package={"name": "count", "history_size": 1},
        hooks="async def create(ctx, messages, options):\n    await ctx.send(str(len(messages)))\n",
    )
    from orchestrator.pipeline import TurnOptions

    await rig.run("hooks.echo", "a", session_id="chat-hs")
    assert (
        await rig.run("hooks.count", "b", session_id="chat-hs")
    ).result.content == "2"  # assistant's size 1
    sized = await rig.run("hooks.count", "c", session_id="chat-hs", options=TurnOptions(history_size=3))
    assert sized.result.content == "4"
    skipped = await rig.run("hooks.count", "d", session_id="chat-hs", options=TurnOptions(skip_history=True))
    assert skipped.result.content == "1"


async def test_subscribers_get_every_event_once_from_log_then_live(rig: Rig) -> None:
    first = await rig.run("hooks.echo", "one", session_id="chat-sub")
    last_seq = first.events[-1].seq
    got: list[int] = []

    async def follow(after: int) -> None:
        async for event in rig.service.subscribe("chat-sub", after_seq=after):
            got.append(event.seq)
            ended = event.type == "event" and event.props.event == "stream_end" and event.thread_id is None
            if ended and event.turn_id != first.turn.turn_id:
                return

    async with anyio.create_task_group() as tg:
        tg.start_soon(follow, 2)
        handle = await rig.service.start(rig.turn("hooks.fast", "two", session_id="chat-sub"))
        await handle.result()
    assert got == list(range(3, got[-1] + 1))
    assert got[-1] > last_seq


async def test_one_turn_at_a_time_per_session(rig: Rig) -> None:
    handle = await rig.service.start(rig.turn("hooks.slow", "x", session_id="chat-busy"))
    assert rig.service.running("chat-busy") is handle
    assert rig.service.turn(handle.turn_id) is handle
    with pytest.raises(Conflict):
        await rig.service.start(rig.turn("hooks.echo", "y", session_id="chat-busy"))
    await handle.interrupt(force=True)
    assert (await handle.result()).status == "cancelled"
    ran = await rig.run("hooks.echo", "now", session_id="chat-busy")
    assert ran.result.status == "completed"
    log = await rig.store.events.after("chat-busy")
    assert validate_stream(log) == []


async def test_owners_and_assistants_are_authorized(rig: Rig, store: Store) -> None:
    await rig.run("hooks.echo", "mine", session_id="chat-alice", owner="alice")
    with pytest.raises(NotFound):
        await rig.service.start(rig.turn("hooks.echo", "theirs", session_id="chat-alice", owner="bob"))
    with pytest.raises(NotFound):
        await rig.service.start(rig.turn("hooks.nope", "x"))
    await store.assistants.create("hooks.fast", owner="carol", package={"name": "private"})
    with pytest.raises(NotFound):
        await rig.service.start(rig.turn("hooks.fast", "x", owner="alice"))
    ran = await rig.run("hooks.fast", "x", owner="carol")
    assert ran.result.content == "fast done"


async def test_aclose_cancels_running_turns(rig: Rig) -> None:
    handle = await rig.service.start(rig.turn("hooks.slow", "x", session_id="chat-close"))
    async for event in handle.events():
        if event.type == "text":
            break
    await rig.service.aclose()
    assert (await handle.result()).status == "cancelled"
    with pytest.raises(Conflict):
        await rig.service.start(rig.turn("hooks.echo", "x"))
    assert validate_stream(await rig.store.events.after("chat-close")) == []


def test_service_satisfies_the_contract() -> None:
    from orchestrator.pipeline import TurnService

    service: TurnService = PipelineService.__new__(PipelineService)
    assert service is not None
