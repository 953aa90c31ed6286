"""`FakeTurnService`: the pipeline contract (`TurnService`) on a real `Store`, with scripted turns.

It keeps the contract's promises the way the real pipeline must: events are stamped by a per-session
`SessionEmitter`, appended to the durable log *before* anyone sees them, and `subscribe` replays the
log and then continues live with no gap and no duplicate. Turns run in the service's own task
group, so a client that goes away never stops one.

The user's last message picks the script:
* `slow <n> <seconds>`: `n` text chunks, one every `seconds` (interruptible between chunks);
* `fail`: an error event and `stream_end` with status `error`;
* anything else: `echo: <text>` in two chunks, usage, a result summary, `stream_end` completed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Self

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from orchestrator.assistants import AssistantRegistry
from orchestrator.errors import Conflict
from orchestrator.pipeline.call_result import CallResult
from orchestrator.pipeline.contract import Admit, Release, TurnIds, TurnInput
from orchestrator.pipeline.handle import is_root_end
from orchestrator.pipeline.service import busy, open_session
from orchestrator.store import Store
from orchestrator.stream import (
    Event,
    LifecycleEvent,
    RandomIds,
    SessionEmitter,
    StreamEnd,
    StreamStatus,
    TextEvent,
    TurnBuilder,
    Usage,
)

PAGE = 1000


class FakeTurn(TurnIds):
    """A `TurnHandle`: every consumer of `events()` sees the whole turn from `stream_start`."""

    def __init__(self, turn: TurnInput) -> None:
        self.input = turn
        self._events: list[Event] = []
        self._changed = anyio.Event()
        self._done = anyio.Event()
        self.graceful = anyio.Event()
        self.scope = anyio.CancelScope()
        self.result_value: CallResult | None = None
        self.release: Release | None = None
        self.ending = False
        """Its root `stream_end` is out (the fake then settles for `FakeTurnService.settle`)."""

    @property
    def emitted(self) -> list[Event]:
        return list(self._events)

    def push(self, event: Event) -> None:
        if is_root_end(event):
            self.ending = True
        self._events.append(event)
        self._changed.set()
        self._changed = anyio.Event()

    def finish(self, result: CallResult) -> None:
        self.result_value = result
        self._done.set()
        self._changed.set()

    async def events(self) -> AsyncIterator[Event]:
        index = 0
        while True:
            if index < len(self._events):
                index += 1
                yield self._events[index - 1]
            elif self._done.is_set():
                return
            else:
                await self._changed.wait()

    async def interrupt(self, *, force: bool = False) -> None:
        if force:
            self.scope.cancel()
        else:
            self.graceful.set()

    async def result(self) -> CallResult:
        await self._done.wait()
        assert self.result_value is not None
        return self.result_value


class FakeTurnService:
    """Satisfies `TurnService` structurally; use as `async with FakeTurnService(store) as turns`."""

    def __init__(
        self, store: Store, *, assistants: AssistantRegistry | None = None, settle: float = 0.05
    ) -> None:
        self.store = store
        self.assistants = assistants
        """Resolves a turn's assistant for the caller's `admit` (needed when one is passed)."""
        self.settle = settle
        """Seconds between a turn's `stream_end` and its end (the real pipeline persists then)."""
        self.started: list[TurnInput] = []
        self.door: anyio.Event | None = None
        """When a test sets it, `start` waits for it before starting anything (as `PipelineService`
        waits at its `LoadGate` on a saturated server); `waiting` counts the starts held there."""
        self.waiting = 0
        self._running: dict[str, FakeTurn] = {}
        self._turns: dict[str, FakeTurn] = {}
        self._emitters: dict[str, SessionEmitter] = {}
        self._subscribers: dict[str, set[MemoryObjectSendStream[Event]]] = defaultdict(set)
        self._tg: TaskGroup | None = None

    async def __aenter__(self) -> Self:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
        assert self._tg is not None
        await self._tg.__aexit__(exc_type, exc, tb)

    async def start(self, turn: TurnInput, *, admit: Admit | None = None) -> FakeTurn:
        previous = self._running.get(turn.session_id)
        if previous is not None and previous.ending:
            await previous.result()
        if turn.session_id in self._running:
            raise Conflict(busy(turn.session_id))
        if self.door is not None:
            self.waiting += 1
            try:
                await self.door.wait()
            finally:
                self.waiting -= 1
        release: Release | None = None
        if admit is not None:
            assert self.assistants is not None, "FakeTurnService(assistants=...) resolves for admit"
            release = admit(await self.assistants.get(turn.assistant_id))
        session = await open_session(self.store, turn)
        if turn.session_id not in self._emitters:
            self._emitters[turn.session_id] = SessionEmitter.resume(turn.session_id, session.last_seq)
        handle = FakeTurn(turn)
        handle.release = release
        self.started.append(turn)
        self._running[turn.session_id] = handle
        self._turns[turn.turn_id] = handle
        assert self._tg is not None
        self._tg.start_soon(self._run, handle)
        return handle

    def running(self, session_id: str) -> FakeTurn | None:
        return self._running.get(session_id)

    def turn(self, turn_id: str) -> FakeTurn | None:
        handle = self._turns.get(turn_id)
        return handle if handle is not None and handle.result_value is None else None

    async def subscribe(self, session_id: str, *, after_seq: int = 0) -> AsyncIterator[Event]:
        send, receive = anyio.create_memory_object_stream[Event](math.inf)
        self._subscribers[session_id].add(send)
        try:
            last = after_seq
            while True:
                page = await self.store.events.after(session_id, last, PAGE)
                for event in page:
                    last = event.seq
                    yield event
                if len(page) < PAGE:
                    break
            async for event in receive:
                if event.seq > last:
                    last = event.seq
                    yield event
        finally:
            self._subscribers[session_id].discard(send)
            send.close()
            receive.close()

    async def aclose(self) -> None:
        for handle in list(self._running.values()):
            await handle.interrupt(force=True)
        for handle in list(self._running.values()):
            await handle.result()

    async def _emit(self, handle: FakeTurn, events: list[Event]) -> None:
        emitter = self._emitters[handle.session_id]
        stamped = emitter.stamp_all(events, turn_id=handle.turn_id)
        with anyio.CancelScope(shield=True):  # a cancel lands between events, never inside a write
            await self.store.events.append(handle.session_id, stamped)
        for event in stamped:
            handle.push(event)
            for subscriber in list(self._subscribers[handle.session_id]):
                subscriber.send_nowait(event)

    async def _run(self, handle: FakeTurn) -> None:
        builder = TurnBuilder(RandomIds(), runner="fake")
        text = str(handle.input.messages[-1].content)
        status: StreamStatus = "completed"
        error: str | None = None
        try:
            with handle.scope:
                await self._emit(
                    handle, builder.stream_start(handle.input.assistant_id, session_id=handle.session_id)
                )
                status, error = await self._script(handle, builder, text)
            if handle.scope.cancelled_caught:
                status = "cancelled"
        finally:
            with anyio.CancelScope(shield=True):
                await self._emit(handle, builder.stream_end(status, error=error))
                content = "".join(e.props.content for e in handle.emitted if isinstance(e, TextEvent))
                end = next(e for e in reversed(handle.emitted) if isinstance(e, LifecycleEvent))
                assert isinstance(end.props, StreamEnd)
                await anyio.sleep(self.settle)
                self._running.pop(handle.session_id, None)
                if handle.release is not None:
                    handle.release()
                handle.finish(
                    CallResult(
                        assistant_id=handle.input.assistant_id,
                        status=status,
                        content=content,
                        error=error,
                        usage=end.props.usage,
                    )
                )

    async def _script(
        self, handle: FakeTurn, builder: TurnBuilder, text: str
    ) -> tuple[StreamStatus, str | None]:
        words = text.split()
        if words[:1] == ["slow"]:
            count, delay = int(words[1]), float(words[2])
            for i in range(count):
                if handle.graceful.is_set():
                    return "cancelled", None
                await self._emit(handle, builder.text(f"chunk {i} "))
                await anyio.sleep(delay)
            return "completed", None
        if words[:1] == ["fail"]:
            await self._emit(handle, builder.error("scripted failure", "runner_failed"))
            return "error", "scripted failure"
        await self._emit(handle, builder.text("echo: "))
        await self._emit(handle, builder.text(text))
        usage = Usage(input_tokens=len(text), output_tokens=len(text) + 6, scope="turn")
        await self._emit(handle, builder.usage(usage))
        await self._emit(handle, builder.result(result="echo: " + text, stop_reason="end_turn", usage=usage))
        return "completed", None
