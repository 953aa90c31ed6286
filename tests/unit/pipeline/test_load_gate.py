"""`LoadGate`: the door of root turns, on a real asyncio loop, and its limit as pure arithmetic."""

from __future__ import annotations

import asyncio
import inspect
import time

import anyio
import pytest

from orchestrator.errors import Conflict
from orchestrator.pipeline.load_gate import AdaptiveLimit, DelayFloor, LoadGate, Overloaded
from orchestrator.settings import Settings

# -- the limit (pure) ---------------------------------------------------------------------------


def test_the_limit_grows_by_one_only_while_turns_wait_at_a_full_limit() -> None:
    limit = AdaptiveLimit(floor=2)
    limit.observe(0.001, target=0.002, running=2, waiting=0)  # no one waits: nothing to grow for
    assert limit.places == 2
    limit.observe(0.001, target=0.002, running=1, waiting=3)  # places free already
    assert limit.places == 2
    for expected in (3, 4, 5):
        limit.observe(0.001, target=0.002, running=limit.places, waiting=3)
        assert limit.places == expected


def test_a_congested_sample_cuts_the_limit_to_a_share_of_the_turns_running_never_below_the_floor() -> None:
    limit = AdaptiveLimit(floor=2)
    limit.limit = 40.0
    limit.observe(0.010, target=0.002, running=10, waiting=5)  # a limit far above use drops to it
    assert limit.places == 9
    for _ in range(50):
        limit.observe(0.010, target=0.002, running=limit.places, waiting=5)
    assert limit.places == 2


def test_the_floor_is_the_lowest_mean_of_the_last_span_and_old_lows_expire() -> None:
    floor = DelayFloor(span=10.0)
    assert floor.value == 0.0
    floor.add(0.004, now=0.0)
    floor.add(0.001, now=1.0)
    floor.add(0.003, now=9.0)
    assert floor.value == 0.001
    floor.add(0.005, now=11.0)  # a new span: the last one's low still counts
    assert floor.value == 0.001
    floor.add(0.006, now=22.0)  # two spans on: only the last span's low is left
    assert floor.value == 0.005


def test_a_gate_made_without_settings_has_the_settings_defaults() -> None:
    """`PipelineService` without a gate makes `LoadGate()`: the same door `cage serve` has unset."""
    door = inspect.signature(LoadGate).parameters
    fields = Settings.model_fields
    made = {name: door[name].default for name in ("floor", "delay_target", "max_wait")}
    assert made == {
        "floor": fields["turn_gate_floor"].default,
        "delay_target": fields["turn_gate_delay"].default,
        "max_wait": fields["turn_gate_wait"].default,
    }


# -- the gate, on the loop ----------------------------------------------------------------------

STILL = 60.0
"""A sample interval no test reaches: the limit stays where it is."""


async def test_turns_under_the_floor_pass_at_once_and_the_next_waits_for_a_place() -> None:
    gate = LoadGate(floor=2, interval=STILL)
    first, second = await gate.enter(), await gate.enter()
    assert (gate.running, gate.waiting) == (2, 0)
    third: list[object] = []

    async def enter() -> None:
        third.append(await gate.enter())

    async with anyio.create_task_group() as tg:
        tg.start_soon(enter)
        await anyio.sleep(0.02)
        assert (third, gate.waiting) == ([], 1)
        first()
        first()  # a place is given back once, however often its release is called
    assert len(third) == 1 and (gate.running, gate.waiting) == (2, 0)
    second()
    assert gate.running == 1
    gate.close()


async def test_places_go_to_the_turns_waiting_longest() -> None:
    gate = LoadGate(floor=1, interval=STILL)
    held = await gate.enter()
    order: list[int] = []

    async def enter(n: int) -> None:
        release = await gate.enter()
        order.append(n)
        release()

    async with anyio.create_task_group() as tg:
        for n in range(5):
            tg.start_soon(enter, n)
            await anyio.sleep(0.005)  # arrival order
        assert gate.waiting == 5
        held()
    assert order == [0, 1, 2, 3, 4]
    assert (gate.waited, gate.refused) == (5, 0)
    gate.close()


async def test_the_limit_opens_to_turns_that_delay_no_event() -> None:
    """Turns that only wait (on a model, a container) make no delay: all of them get in."""
    gate = LoadGate(floor=2, delay_target=0.05, interval=0.002)
    releases: list[object] = []

    async def enter() -> None:
        releases.append(await gate.enter())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for _ in range(12):
                tg.start_soon(enter)
    assert gate.running == 12 and gate.limit >= 12
    gate.close()


async def test_a_congested_event_path_holds_new_turns_at_the_door() -> None:
    gate = LoadGate(floor=2, delay_target=0.002, max_wait=5.0, interval=0.002)
    gate._limit.limit = 8.0  # grown earlier by a lighter load
    releases = [await gate.enter() for _ in range(8)]
    for _ in range(3):  # a moment without congestion: the path's floor is 1 ms
        gate.observe(0.001)
        await anyio.sleep(0.003)
    admitted: list[object] = []

    async def enter() -> None:
        admitted.append(await gate.enter())

    async with anyio.create_task_group() as tg:
        tg.start_soon(enter)
        for _ in range(20):  # events now wait 20 ms each: the limit falls under the turns running
            gate.observe(0.020)
            await anyio.sleep(0.003)
        assert admitted == [] and gate.limit < 8
        while gate.running >= gate.limit:  # turns end; the next one gets in once there is room
            releases.pop()()
            await anyio.sleep(0.003)
    assert len(admitted) == 1
    gate.close()


async def test_a_loop_slowed_by_other_work_holds_no_turn_back_while_no_event_waits() -> None:
    """Only event delays count: turns that wait on models make none, however late the loop runs."""
    gate = LoadGate(floor=1, delay_target=0.002, max_wait=5.0, interval=0.002)
    releases = [await gate.enter()]
    for _ in range(10):
        time.sleep(0.01)  # noqa: ASYNC251 - the point: the loop is blocked, the sample is 10 ms late
        await anyio.sleep(0.003)
    with anyio.fail_after(1):
        releases += [await gate.enter() for _ in range(5)]
    assert gate.running == 6
    for release in releases:
        release()
    gate.close()


async def test_a_turn_that_finds_no_place_in_time_is_refused_and_leaves_the_queue() -> None:
    gate = LoadGate(floor=1, max_wait=0.05, interval=STILL)
    held = await gate.enter()
    started = time.monotonic()
    with pytest.raises(Overloaded) as refused:
        await gate.enter()
    assert time.monotonic() - started >= 0.05
    assert refused.value.code == "server_busy" and "retry later" in str(refused.value)
    assert (gate.waiting, gate.refused, gate.running) == (0, 1, 1)
    held()
    assert gate.running == 0
    gate.close()


async def test_a_caller_that_gives_up_leaves_the_queue_and_frees_a_place_handed_to_it() -> None:
    gate = LoadGate(floor=1, interval=STILL)
    held = await gate.enter()
    with anyio.move_on_after(0.02):
        await gate.enter()
    assert (gate.waiting, gate.running) == (0, 1)

    # handed a place as it is cancelled, by a caller that gives back what it got (as `start` does)
    async def caller() -> None:
        release = None
        try:
            release = await gate.enter()
            await anyio.sleep_forever()
        finally:
            if release is not None:
                release()

    async with anyio.create_task_group() as tg:
        tg.start_soon(caller)
        await anyio.sleep(0.01)
        held()
        tg.cancel_scope.cancel()
    assert (gate.waiting, gate.running) == (0, 0)
    gate.close()


async def test_closing_refuses_the_turns_waiting_and_every_later_one() -> None:
    gate = LoadGate(floor=1, interval=STILL)
    held = await gate.enter()
    refusals: list[str] = []

    async def enter() -> None:
        try:
            await gate.enter()
        except Conflict as exc:
            refusals.append(str(exc))

    async with anyio.create_task_group() as tg:
        tg.start_soon(enter)
        await anyio.sleep(0.01)
        gate.close()
    assert refusals == ["the server is shutting down; the turn was not started"]
    with pytest.raises(Conflict):
        await gate.enter()
    held()
    assert gate.running == 0


async def test_no_timer_runs_while_fewer_turns_than_the_floor_run() -> None:
    """A `cage run` of one turn never samples anything."""
    gate = LoadGate(floor=2, delay_target=1.0, interval=0.001)
    release = await gate.enter()
    before = len(asyncio.get_running_loop()._scheduled)  # type: ignore[attr-defined]
    assert gate._timer is None
    second = await gate.enter()
    assert gate._timer is not None
    assert len(asyncio.get_running_loop()._scheduled) == before + 1  # type: ignore[attr-defined]
    second()
    release()
    await anyio.sleep(0.005)
    assert gate._timer is None
    gate.close()
