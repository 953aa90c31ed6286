"""`RunningTurn`: the `TurnHandle` of a turn running in the background."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio

from orchestrator.pipeline.call_result import CallResult
from orchestrator.pipeline.cancel import CancelSignal
from orchestrator.pipeline.contract import TurnIds, TurnInput
from orchestrator.pipeline.hub import SessionHub
from orchestrator.stream import Event, LifecycleEvent, StreamEnd


def is_root_end(event: Event) -> bool:
    return (
        isinstance(event, LifecycleEvent) and isinstance(event.props, StreamEnd) and event.thread_id is None
    )


class RunningTurn(TurnIds):
    """One turn: its events (from the session hub), its interrupt, its result."""

    def __init__(self, hub: SessionHub, turn: TurnInput, start_seq: int) -> None:
        self.input = turn
        self.start_seq = start_seq
        """The session's last seq before this turn; its events follow it."""
        self.signal = CancelSignal()
        self._hub = hub
        self._done = anyio.Event()
        self._result: CallResult | None = None
        self._ending = False

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def ending(self) -> bool:
        """Its root `stream_end` is being published: over for clients, still persisting."""
        return self._ending

    def end_out(self) -> None:
        """Called by the service as it publishes the root `stream_end`."""
        self._ending = True

    async def events(self) -> AsyncIterator[Event]:
        """This turn's stamped events, `stream_start` to `stream_end`; replays what was missed.
        The hub subscription is closed as soon as the turn's end is out (not left to the garbage
        collector, which kept a dead live queue registered)."""
        subscription = self._hub.subscribe(self.session_id, after_seq=self.start_seq)
        try:
            async for event in subscription:
                if event.turn_id != self.turn_id:
                    return
                yield event
                if is_root_end(event):
                    return
        finally:
            await subscription.aclose()  # type: ignore[attr-defined]

    async def interrupt(self, *, force: bool = False) -> None:
        """Graceful: the runner is asked to stop and the session is kept. Force: cancel at once."""
        self.signal.set(force=force)

    async def result(self) -> CallResult:
        await self._done.wait()
        assert self._result is not None
        return self._result

    def finish(self, result: CallResult) -> None:
        """Called by the service once the turn is persisted (or failed to be)."""
        if self._result is None:
            self._result = result
        self._done.set()
