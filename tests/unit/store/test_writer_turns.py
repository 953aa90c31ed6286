"""SQLite writers' turns (`WriterTurns`): the event log's group commit goes ahead of the other
waiting writers, a cancelled waiter never keeps the lock, and a delete that finds nothing writes
nothing (`Database.delete`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from orchestrator.store import Store
from orchestrator.store.database import WriterTurns


async def _turn(turns: WriterTurns, order: list[str], name: str, *, ahead: bool = False) -> None:
    await turns.acquire(ahead=ahead)
    order.append(name)
    await asyncio.sleep(0)
    turns.release()


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_writer_ahead_goes_before_the_writers_that_wait() -> None:
    turns = WriterTurns()
    order: list[str] = []
    await turns.acquire()
    waiting = [asyncio.create_task(_turn(turns, order, f"w{i}")) for i in range(3)]
    await _settle()
    ahead = asyncio.create_task(_turn(turns, order, "batch", ahead=True))
    await _settle()
    turns.release()
    await asyncio.gather(*waiting, ahead)
    assert order == ["batch", "w0", "w1", "w2"]


async def test_writers_ahead_still_let_every_other_writer_through() -> None:
    """The group commit asks again after each batch: it and the others alternate."""
    turns = WriterTurns()
    order: list[str] = []

    async def flusher() -> None:
        for n in range(3):
            await _turn(turns, order, f"batch{n}", ahead=True)

    await turns.acquire()
    others = [asyncio.create_task(_turn(turns, order, f"w{i}")) for i in range(3)]
    await _settle()
    batches = asyncio.create_task(flusher())
    await _settle()
    turns.release()
    await asyncio.gather(*others, batches)
    assert order == ["batch0", "w0", "batch1", "w1", "batch2", "w2"]


async def test_a_cancelled_waiter_never_keeps_the_turn() -> None:
    turns = WriterTurns()
    order: list[str] = []
    await turns.acquire()
    gone = asyncio.create_task(turns.acquire())
    handed = asyncio.create_task(turns.acquire())
    last = asyncio.create_task(_turn(turns, order, "last"))
    await _settle()
    gone.cancel()
    turns.release()  # hands the turn to `handed`, which is cancelled before it runs
    handed.cancel()
    results = await asyncio.gather(gone, handed, last, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert isinstance(results[1], asyncio.CancelledError)
    assert order == ["last"]
    await asyncio.wait_for(turns.acquire(), 5)  # free again


async def test_a_delete_that_finds_nothing_takes_no_write_turn(tmp_path: Path) -> None:
    store = Store.from_url(f"sqlite+aiosqlite:///{tmp_path / 'cage.db'}")
    await store.migrate()
    try:
        await store.checkpoints.save("turn-1", 1, {"round": 1})
        async with store._db.write():  # another writer holds the turn
            assert await asyncio.wait_for(store.checkpoints.delete("turn-2"), 10) == 0
            assert await asyncio.wait_for(store.memory.clear("chat", "chat-1"), 10) == 0
        assert await store.checkpoints.delete("turn-1") == 1
        assert await store.checkpoints.latest("turn-1") is None
    finally:
        await store.aclose()
