"""`at_once`: calls made concurrently, every one finished, the error as if they were made in turn."""

from __future__ import annotations

import anyio
import pytest

from orchestrator.overlap import at_once


async def test_the_first_call_that_failed_in_the_order_given_raises_whichever_failed_first() -> None:
    finished: list[str] = []

    async def slow_failure() -> None:
        await anyio.sleep(0.05)
        finished.append("slow")
        raise ValueError("the first call's")

    async def quick_failure() -> None:
        finished.append("quick")
        raise KeyError("the second call's")

    async def success() -> None:
        await anyio.sleep(0.02)
        finished.append("success")

    with pytest.raises(ValueError, match="the first call's"):
        await at_once(slow_failure, quick_failure, success)
    assert sorted(finished) == ["quick", "slow", "success"]  # none cut short by another's failure


async def test_calls_run_side_by_side() -> None:
    """Each call waits for the other to have started: made in turn, they would wait forever."""
    first, second = anyio.Event(), anyio.Event()

    async def one() -> None:
        first.set()
        await second.wait()

    async def two() -> None:
        second.set()
        await first.wait()

    with anyio.fail_after(10):
        await at_once(one, two)
