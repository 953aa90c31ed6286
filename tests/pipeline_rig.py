"""`Rig`: a `PipelineService` wired for tests, with helpers to run a turn and check its stream.

Shared by the unit tests (fake sandbox backend) and the integration tests (real Docker backend).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from orchestrator.dsl import AppLoader
from orchestrator.pipeline import CallResult, InputMessage, PipelineService, TurnInput, TurnOptions
from orchestrator.sandbox.backend import SandboxBackend
from orchestrator.sandbox.images import ImageBuilder
from orchestrator.sandbox.manager import SandboxManager
from orchestrator.settings import Settings
from orchestrator.store import Store
from orchestrator.stream import Event, LifecycleEvent, MessageEnd, StreamEnd, StreamStart, validate_stream


@dataclass
class Ran:
    """One finished turn: its result and its stamped events (as the handle streamed them)."""

    result: CallResult
    events: list[Event]
    turn: TurnInput
    problems: list[str] = field(default_factory=list)

    def ends(self) -> dict[str | None, StreamEnd]:
        """`stream_end` props by thread id (None: the root)."""
        return {
            e.thread_id: e.props
            for e in self.events
            if isinstance(e, LifecycleEvent) and isinstance(e.props, StreamEnd)
        }

    def starts(self) -> dict[str | None, StreamStart]:
        return {
            e.thread_id: e.props
            for e in self.events
            if isinstance(e, LifecycleEvent) and isinstance(e.props, StreamStart)
        }

    def thread_of(self, assistant_id: str) -> str | None:
        for thread, start in self.starts().items():
            if start.assistant_id == assistant_id and thread is not None:
                return thread
        raise AssertionError(f"no thread for {assistant_id}: {self.starts()}")

    def texts(self, thread: str | None = None) -> list[str]:
        """The full text of each text message of `thread`, from its `message_end`."""
        return [
            e.props.content
            for e in self.events
            if isinstance(e, LifecycleEvent)
            and isinstance(e.props, MessageEnd)
            and e.props.type == "text"
            and e.thread_id == thread
            and isinstance(e.props.content, str)
        ]

    def errors(self) -> list[Any]:
        return [e.props for e in self.events if e.type == "error"]


@dataclass
class Rig:
    root: Path
    store: Store
    loader: AppLoader
    manager: SandboxManager
    service: PipelineService

    @classmethod
    def build(
        cls,
        root: Path,
        store: Store,
        backend: SandboxBackend,
        *,
        tasks: TaskGroup,
        data_dir: Path,
        images: ImageBuilder | None = None,
        labels: dict[str, str] | None = None,
        environ: dict[str, str] | None = None,
    ) -> Rig:
        from tests.unit.sandbox.fakes import FakeImageBuilder

        settings = Settings(app_dir=root, data_dir=data_dir)
        loader = AppLoader(root, environ=environ)
        manager = SandboxManager(backend, images or FakeImageBuilder(), settings, extra_labels=labels)
        return cls(
            root,
            store,
            loader,
            manager,
            PipelineService(tasks=tasks, loader=loader, manager=manager, store=store),
        )

    def turn(
        self,
        assistant_id: str,
        content: str,
        *,
        owner: str = "alice",
        session_id: str | None = None,
        options: TurnOptions | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> TurnInput:
        return TurnInput(
            assistant_id=assistant_id,
            owner=owner,
            session_id=session_id or f"chat-{uuid.uuid4().hex[:10]}",
            messages=(InputMessage(role="user", content=content),),
            options=options or TurnOptions(),
            metadata=metadata or {},
        )

    async def run(self, assistant_id: str, content: str, *, limit: float = 60, **kw: Any) -> Ran:
        """Start a turn, read its events to the end, and check the stream with `validate_stream`."""
        turn = self.turn(assistant_id, content, **kw)
        with anyio.fail_after(limit):
            handle = await self.service.start(turn)
            events = [e async for e in handle.events()]
            result = await handle.result()
        ran = Ran(result, events, turn, validate_stream(events))
        assert not ran.problems, ran.problems
        return ran
