"""Sync hooks' way into the event loop: `dual` lets one hook API serve async and sync hooks.

In the event loop a call returns an awaitable; in the worker thread a sync hook runs in, the same
call runs on the loop and returns the result."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

import sniffio
from anyio import from_thread

P = ParamSpec("P")
T = TypeVar("T")


def in_worker_thread() -> bool:
    """True outside any event loop (a sync hook's worker thread)."""
    try:
        sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return True
    return False


def dual(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Any]:
    """Wrap an async method so that sync hooks (in a worker thread) can call it directly."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
        if in_worker_thread():
            return from_thread.run(functools.partial(fn, *args, **kwargs))
        return fn(*args, **kwargs)

    return wrapper
