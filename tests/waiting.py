"""`until`: poll a condition that no event announces (a counter, a row), bounded."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio


async def until(
    condition: Callable[[], Awaitable[bool]] | Callable[[], bool],
    *,
    within: float,
    what: str = "the condition",
) -> None:
    """Return once `condition` holds (a plain or an async check); fail after `within` seconds,
    naming `what` was awaited."""
    try:
        with anyio.fail_after(within):
            while True:
                held = condition()
                if held if isinstance(held, bool) else await held:
                    return
                await anyio.sleep(0.005)
    except TimeoutError:
        raise AssertionError(f"timed out after {within:g} s waiting for {what}") from None
