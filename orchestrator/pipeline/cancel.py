"""`CancelSignal`: a call's interrupt, as a tree that setting propagates down.

A turn's root call holds the root signal (its `RunningTurn` sets it); every nested call, forked
or delegated, holds a child. Setting a signal sets every signal under it, now and later, so each
call waits on its own signal (`await signal.wait()`) and never looks up its ancestors. A child can
be set alone: `agent.any`/`agent.race` stop their losers that way, and the turn goes on.

Two strengths, as a client can ask: graceful (`set()`: a runner is asked to stop and gets its
grace) and hard (`set(force=True)`: cancel at once). Hard implies graceful.
"""

from __future__ import annotations

import weakref

import anyio


class CancelSignal:
    """One call's interrupt; `child()` makes the signal of a call nested under it."""

    def __init__(self) -> None:
        self._graceful = anyio.Event()
        self._hard = anyio.Event()
        self._children: weakref.WeakSet[CancelSignal] = weakref.WeakSet()
        """Held weakly: a finished nested call's signal goes with its frame."""
        self._parent: CancelSignal | None = None
        """Held, so the chain from the root to a live signal stays whole; never read."""

    def child(self) -> CancelSignal:
        """A signal set whenever this one is (with the same strength), or on its own."""
        child = CancelSignal()
        child._parent = self
        self._children.add(child)
        if self._graceful.is_set():
            child.set(force=self._hard.is_set())
        return child

    def set(self, *, force: bool = False) -> None:
        """Ask this call and every call under it to stop; `force`: at once. Idempotent."""
        self._graceful.set()
        if force:
            self._hard.set()
        for child in list(self._children):
            child.set(force=force)

    def is_set(self) -> bool:
        """True once a stop was asked (graceful or hard)."""
        return self._graceful.is_set()

    def forced(self) -> bool:
        """True once a hard stop was asked."""
        return self._hard.is_set()

    async def wait(self) -> None:
        """Until a stop is asked."""
        await self._graceful.wait()

    async def wait_forced(self) -> None:
        """Until a hard stop is asked."""
        await self._hard.wait()

    @property
    def requested(self) -> anyio.Event:
        """The graceful request as an `anyio.Event`, for the code below the pipeline that waits on
        one (the runner bridge, the LLM loop). Set it through `set()`, which propagates."""
        return self._graceful
