"""Checkpoints: one per (turn, round), replaced on re-save, the highest round is the latest."""

from __future__ import annotations

from orchestrator.store import Store
from tests.unit.store.conftest import FakeClock


async def test_latest_is_the_highest_round_and_rounds_are_replaced(store: Store, clock: FakeClock) -> None:
    assert await store.checkpoints.latest("t1") is None
    await store.checkpoints.save("t1", 1, {"messages": [{"role": "user", "content": "go"}]})
    clock.advance(1)
    await store.checkpoints.save("t1", 2, {"messages": [], "pending_tools": ["bash"]})
    await store.checkpoints.save("t2", 7, {"other": True})
    clock.advance(1)
    replaced = await store.checkpoints.save("t1", 1, {"messages": [], "retried": 1})

    latest = await store.checkpoints.latest("t1")
    assert (
        latest is not None
        and latest.round == 2
        and latest.payload == {"messages": [], "pending_tools": ["bash"]}
    )
    rounds = await store.checkpoints.of_turn("t1")
    assert [(c.round, c.payload) for c in rounds] == [
        (1, {"messages": [], "retried": 1}),
        (2, latest.payload),
    ]
    assert rounds[0] == replaced and rounds[0].created_at == clock.now


async def test_delete_drops_only_that_turn(store: Store) -> None:
    for r in range(3):
        await store.checkpoints.save("t1", r, {"r": r})
    await store.checkpoints.save("t2", 0, {"r": 0})
    assert await store.checkpoints.delete("t1") == 3
    assert await store.checkpoints.of_turn("t1") == []
    assert [c.payload for c in await store.checkpoints.of_turn("t2")] == [{"r": 0}]
