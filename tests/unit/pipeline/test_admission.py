"""`PipelineService.start` is the one admission point: the busy check, the assistant and the
caller's own limits (`admit`) are decided there, once, in that order."""

from __future__ import annotations

import anyio
import pytest

from orchestrator.dsl import Assistant
from orchestrator.errors import CapacityError, Conflict
from orchestrator.pipeline import Release, TurnHandle, TurnInput
from orchestrator.pipeline.handle import is_root_end
from orchestrator.pipeline.load_gate import LoadGate, Overloaded
from orchestrator.pipeline.service import STARTING
from tests.pipeline_rig import Rig
from tests.waiting import until

BUSY = "a turn is already running in session 'chat-race'; interrupt it or wait for stream_end"


async def test_two_concurrent_starts_on_one_session_admit_one_and_refuse_the_other(rig: Rig) -> None:
    admitted: list[object] = []
    refused: list[str] = []

    async def start() -> None:
        try:
            admitted.append(await rig.service.start(rig.turn("hooks.slow", "x", session_id="chat-race")))
        except Conflict as exc:
            refused.append(str(exc))

    async with anyio.create_task_group() as tg:
        tg.start_soon(start)
        tg.start_soon(start)
    assert len(admitted) == 1 and refused == [BUSY]
    handle = rig.service.running("chat-race")
    assert handle is admitted[0] and handle is not None
    await handle.interrupt(force=True)
    assert (await handle.result()).status == "cancelled"


async def test_admit_sees_the_resolved_assistant_and_its_release_runs_once_at_the_end(rig: Rig) -> None:
    seen: list[str] = []
    released: list[str] = []

    def admit(assistant: Assistant) -> Release:
        seen.append(assistant.id)
        return lambda: released.append(assistant.id)

    handle = await rig.service.start(rig.turn("hooks.echo", "hi", session_id="chat-admit"), admit=admit)
    assert seen == ["hooks.echo"]
    assert (await handle.result()).status == "completed"
    assert released == ["hooks.echo"]


async def test_a_refusal_by_admit_starts_nothing_and_leaves_the_session_free(rig: Rig) -> None:
    def full(assistant: Assistant) -> Release:
        raise CapacityError("owner alice", 0)

    with pytest.raises(CapacityError):
        await rig.service.start(rig.turn("hooks.echo", "hi", session_id="chat-full"), admit=full)
    assert rig.service.running("chat-full") is None
    assert await rig.store.events.after("chat-full") == []
    ran = await rig.run("hooks.echo", "again", session_id="chat-full")
    assert ran.result.status == "completed"


async def test_a_message_after_the_stream_end_waits_for_the_persist_instead_of_being_refused(
    rig: Rig,
) -> None:
    first = await rig.service.start(rig.turn("hooks.echo", "one", session_id="chat-next"))
    async for event in first.events():
        if is_root_end(event):
            break
    assert first.ending
    second = await rig.service.start(rig.turn("hooks.echo", "two", session_id="chat-next"))
    assert (await first.result()).status == "completed"
    assert (await second.result()).status == "completed"


async def test_a_burst_of_starts_begins_a_few_at_a_time_and_starts_them_all(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many turns starting at once do their reads and first write `STARTING` at a time, so their
    queries do not all sit in the event loop ahead of the running turns' events; all start."""
    at_once = most = 0
    authorize = rig.service.authorize

    async def counted(owner: str, assistant_id: str) -> Assistant:
        nonlocal at_once, most
        at_once += 1
        most = max(most, at_once)
        try:
            assistant = await authorize(owner, assistant_id)
            await anyio.sleep(0.01)  # a start that takes a while: the others queue behind it
            return assistant
        finally:
            at_once -= 1

    monkeypatch.setattr(rig.service, "authorize", counted)
    turns = [rig.turn("hooks.echo", f"hi {n}") for n in range(3 * STARTING)]
    handles: list[TurnHandle] = []

    async def start(turn: TurnInput) -> None:
        handles.append(await rig.service.start(turn))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for turn in turns:
                tg.start_soon(start, turn)
        results = [await handle.result() for handle in handles]
    assert most == STARTING
    assert [r.status for r in results] == ["completed"] * len(turns)


async def test_a_turn_that_finds_no_place_at_the_door_is_refused_and_starts_nothing(rig: Rig) -> None:
    """With the door full (`LoadGate`), a turn waits there, then is refused: no session reserved,
    no event written, the same turn starts once there is room."""
    rig.service.gate = LoadGate(floor=1, max_wait=0.1, interval=60.0)
    slow = await rig.service.start(rig.turn("hooks.slow", "x", session_id="chat-holds"))
    with pytest.raises(Overloaded) as refused:
        await rig.service.start(rig.turn("hooks.echo", "hi", session_id="chat-door"))
    assert refused.value.code == "server_busy"
    assert rig.service.running("chat-door") is None
    assert await rig.store.events.after("chat-door") == []
    await slow.interrupt(force=True)
    assert (await slow.result()).status == "cancelled"
    ran = await rig.run("hooks.echo", "again", session_id="chat-door")
    assert ran.result.status == "completed"
    assert rig.service.gate.running == 0


async def test_a_turn_waiting_at_the_door_starts_when_a_running_one_ends(rig: Rig) -> None:
    rig.service.gate = LoadGate(floor=1, max_wait=30.0, interval=60.0)
    slow = await rig.service.start(rig.turn("hooks.slow", "x", session_id="chat-first"))
    started: list[TurnHandle] = []

    async def start() -> None:
        started.append(await rig.service.start(rig.turn("hooks.echo", "hi", session_id="chat-second")))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(start)
            await until(lambda: rig.service.gate.waiting == 1, within=20, what="a turn at the door")
            assert started == [] and rig.service.gate.waiting == 1
            await slow.interrupt(force=True)
        assert (await started[0].result()).status == "completed"
    assert rig.service.gate.running == 0


async def test_closing_the_service_refuses_the_turns_at_the_door(rig: Rig) -> None:
    rig.service.gate = LoadGate(floor=1, max_wait=30.0, interval=60.0)
    await rig.service.start(rig.turn("hooks.slow", "x", session_id="chat-running"))
    refused: list[str] = []

    async def start() -> None:
        try:
            await rig.service.start(rig.turn("hooks.echo", "hi", session_id="chat-waiting"))
        except Conflict as exc:
            refused.append(str(exc))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(start)
            await until(lambda: rig.service.gate.waiting == 1, within=20, what="a turn at the door")
            await rig.service.aclose()
    assert refused == ["the server is shutting down; the turn was not started"]
    assert rig.service.running("chat-waiting") is None


async def test_a_turn_at_the_door_already_holds_what_admit_reserved_and_a_refusal_comes_at_once(
    rig: Rig,
) -> None:
    """The caller's caps count turns waiting at the door, so one owner cannot queue past them; a
    turn they refuse is refused before it waits."""
    rig.service.gate = LoadGate(floor=1, max_wait=30.0, interval=60.0)
    held: list[str] = []

    def admit(assistant: Assistant) -> Release:
        if len(held) >= 2:
            raise CapacityError("owner alice", 2)
        held.append(assistant.id)
        return lambda: held.remove(assistant.id)

    slow = await rig.service.start(rig.turn("hooks.slow", "x", session_id="chat-cap-1"), admit=admit)
    waiting: list[TurnHandle] = []

    async def start() -> None:
        waiting.append(
            await rig.service.start(rig.turn("hooks.echo", "hi", session_id="chat-cap-2"), admit=admit)
        )

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(start)
            await until(lambda: rig.service.gate.waiting == 1, within=20, what="a turn at the door")
            assert rig.service.gate.waiting == 1 and len(held) == 2  # it waits, and counts
            with anyio.fail_after(1):  # refused at once, not after a wait at the door
                with pytest.raises(CapacityError):
                    await rig.service.start(
                        rig.turn("hooks.echo", "no", session_id="chat-cap-3"), admit=admit
                    )
            await slow.interrupt(force=True)
        assert (await waiting[0].result()).status == "completed"
    assert held == [] and rig.service.gate.running == 0
