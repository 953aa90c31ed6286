"""`at_once`: independent calls made concurrently, their errors raised as if made in turn."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio


async def at_once(*calls: Callable[[], Awaitable[object]]) -> None:
    """Run `calls` concurrently and wait for all of them; then raise the error of the first of
    them (in the order given) that failed, if any.

    None is cut short by another's failure, so whoever cleans up afterwards finds every call
    finished (a container made, a network joined) rather than half-way. The error is the call's
    own (a `SandboxError`, say), not an exception group, and the same whichever finished first;
    cancellation is not caught.
    """
    errors: dict[int, Exception] = {}

    async def run(index: int, call: Callable[[], Awaitable[object]]) -> None:
        try:
            await call()
        except Exception as exc:  # noqa: BLE001 - raised below, once every call has finished
            errors[index] = exc

    async with anyio.create_task_group() as tg:
        for index, call in enumerate(calls):
            tg.start_soon(run, index, call)
    if errors:
        raise errors[min(errors)]
