"""`PipelineService`: the `TurnService` the API and the CLI use.

```python
async with open_services(settings) as services:   # orchestrator/services.py builds the service
  handle = await services.turns.start(TurnInput(assistant_id="examples.hooks", owner="alice",
                                                session_id="c1", messages=(InputMessage(content="hi"),)))
  async for event in handle.events(): ...
  result = await handle.result()
```
`start` authorizes, makes sure the session exists and belongs to the owner, reserves the session (one
turn at a time) and runs the turn in the task group its owner handed it (`open_services`, for the
server and `cage run`); the events are stamped by the session's emitter, appended to the durable log
and fanned out to `subscribe()`rs. `aclose()` ends the turns it started before the owner's group closes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

import anyio
import structlog
from anyio.abc import TaskGroup
from pydantic import ValidationError

from orchestrator.assistants import AssistantRegistry
from orchestrator.dsl import AppLoader, Assistant
from orchestrator.errors import CageError, Conflict, NotFound, ProtocolError, UsageError
from orchestrator.gateway import ModelGateway
from orchestrator.llm.connections import ModelConnections
from orchestrator.pipeline.call import Call, TurnScope
from orchestrator.pipeline.call_result import CallResult
from orchestrator.pipeline.call_runner import CallRunner, Finish
from orchestrator.pipeline.callstack import CallStack
from orchestrator.pipeline.contract import Admit, Release, TurnInput, last_user_text
from orchestrator.pipeline.handle import RunningTurn
from orchestrator.pipeline.hooks.memory import HookMemory
from orchestrator.pipeline.hooks.modules import HookModules
from orchestrator.pipeline.hub import SessionHub
from orchestrator.pipeline.load_gate import LoadGate
from orchestrator.pipeline.options import CallOptions
from orchestrator.pipeline.permission_answers import PermissionAnswer
from orchestrator.pipeline.permissions import Permissions, Unattended
from orchestrator.pipeline.recorder import TurnRecorder
from orchestrator.pipeline.resume import ResumeStore, SessionResumeStore
from orchestrator.pipeline.titles import make_title, title_assistant_id
from orchestrator.sandbox.manager import SandboxManager
from orchestrator.store import RecordExists, SessionRecord, Store
from orchestrator.stream import Event, IdSource, RandomIds, TurnBuilder

log = structlog.get_logger(__name__)


def busy(session_id: str) -> str:
    """The refusal of a turn in a session that runs one."""
    return f"a turn is already running in session {session_id!r}; interrupt it or wait for stream_end"


STARTING = 2
"""Turns this service begins at once (the reads and the first write before a turn runs). A burst
of new turns (fifty clients sending together) otherwise queued fifty chains of queries in the
event loop at once, ahead of the events of the turns already running; a few at a time, they
interleave, and the turns' own work is spread out instead of arriving in one wave."""
SETTLE_WAIT = 30.0
"""Seconds a new turn waits for the session's previous one, already ended on the wire, to be persisted."""
CLOSE_GRACE = 10.0
"""Seconds `aclose()` lets running turns stop gracefully before interrupting them by force."""
CRASHED = "the turn failed inside the orchestrator (see its log)"
FORCE_GRACE = 5.0
"""Seconds a forced interrupt, and then a task cancel, each get: `aclose()` ends within
`close_grace + 2 * FORCE_GRACE`, inside a container's usual 30 s stop grace."""


class _Job:
    """A turn or a title job in the owner's task group: asked to stop, cancelled alone, awaited to
    its end."""

    def __init__(self) -> None:
        self.stop = anyio.Event()
        """Asked to end at its next step (a title job; a turn has its `CancelSignal`)."""
        self.scope = anyio.CancelScope()
        self.ended = anyio.Event()


@asynccontextmanager
async def turn_tasks() -> AsyncIterator[TaskGroup]:
    """A task group for a `PipelineService`'s turns, for its owner to hold open around the service.

    anyio wraps an exception of the body in an `ExceptionGroup`; the turns never raise into the
    group, so the body's own error comes out as it was raised (a `ConfigError` stays one)."""
    error: BaseException | None = None
    try:
        async with anyio.create_task_group() as tasks:
            yield tasks
    except BaseExceptionGroup as group:
        if len(group.exceptions) != 1:
            raise
        error = group.exceptions[0]
    if error is not None:
        raise error


async def open_session(store: Store, turn: TurnInput) -> SessionRecord:
    """The turn's session, created on first use for its owner and assistant (a racing creator's wins)."""
    session = await store.sessions.get(turn.session_id)
    if session is None:
        try:
            session = await store.sessions.create(turn.owner, turn.assistant_id, session_id=turn.session_id)
        except RecordExists:
            session = await store.sessions.require(turn.session_id)
    return session


async def _ended(jobs: set[_Job], seconds: float) -> set[_Job]:
    """Wait up to `seconds` for `jobs` to end; the ones still running."""
    with anyio.move_on_after(seconds):
        for job in list(jobs):
            await job.ended.wait()
    return {job for job in jobs if not job.ended.is_set()}


class PipelineService:
    """Runs turns: authorize, stages, events, persistence; one turn at a time per session."""

    def __init__(
        self,
        *,
        tasks: TaskGroup,
        loader: AppLoader,
        manager: SandboxManager,
        store: Store,
        resume: ResumeStore | None = None,
        ids: IdSource | None = None,
        close_grace: float = CLOSE_GRACE,
        assistants: AssistantRegistry | None = None,
        api_env_prefix: str | None = None,
        gateway: ModelGateway | None = None,
        allow_host_mcp: bool = False,
        unattended: Unattended | None = None,
        titles: bool = True,
        gate: LoadGate | None = None,
    ) -> None:
        """`tasks`: where turns and title jobs run, the owner's group (open until after `aclose()`).
        `unattended` (CI mode): who answers permission requests when no client is there.
        `titles=False`: no title jobs (`cage run` closes the service as its turn ends, which would
        cancel the job, after its import of the LLM-mode stack had already cost the run).
        `assistants`: the process's registry (the API's catalog shares it); without one, the service
        makes its own over `loader` and `store`, exposing `api_env_prefix` to stored assistants.
        `gate`: where root turns wait while the event path is congested (`LoadGate`'s defaults
        without one)."""
        self._titles_on = titles
        self.loader = loader
        self._allow_host_mcp = allow_host_mcp
        self.gateway = gateway or ModelGateway()
        """Closed with the service; runner turns get their model access through it."""
        self.connections = ModelConnections()
        """The model connections of LLM-mode turns and title jobs; closed with the service."""
        self.assistants = assistants or AssistantRegistry(loader, store, env_prefix=api_env_prefix)
        """Where `authorize` finds assistants: files, system and stored ones."""
        self.manager = manager
        self.store = store
        self.gate = gate or LoadGate()
        self.hub = SessionHub(store, on_delay=self.gate.observe)
        self.hooks = HookModules()
        self.permissions = Permissions(store, unattended=unattended)
        self._resume = resume or SessionResumeStore(store)
        self._ids = ids or RandomIds()
        self._close_grace = close_grace
        self._calls = CallRunner()
        self._by_session: dict[str, RunningTurn] = {}
        self._by_turn: dict[str, RunningTurn] = {}
        self._reserved: set[str] = set()
        self._group = tasks
        self._turns: set[_Job] = set()
        self._titles: set[_Job] = set()
        """Background title jobs (`titles`), cancelled when the service closes."""
        self._closed = False
        self._starting = anyio.Semaphore(STARTING, fast_acquire=True)
        """Turns beginning at once: their reads and first write; the rest wait for a place."""

    # -- TurnService -----------------------------------------------------------------------------

    async def start(self, turn: TurnInput, *, admit: Admit | None = None) -> RunningTurn:
        """The one admission point: reserve the session (a session whose turn's `stream_end` is out
        already waits, bounded, for that turn to be persisted), resolve the assistant, check the
        options and the caller's `admit` (so a turn waiting at the door counts against the caller's
        caps), wait at the door while the event path is congested (`LoadGate`), make sure the
        session exists and belongs to the owner, and run the turn in the background.

        Raises:
            NotFound: unknown assistant, one the owner may not use, or another owner's session.
            Conflict: a turn is already running in this session, or the service is closing.
            Forbidden: `metadata.team_id` names a team the owner is not a member of.
            ConfigError: the assistant's configuration is broken.
            UsageError: the options or metadata are not valid.
            CapacityError: `admit` refused the turn, or it found no place at the door in time
                (`Overloaded`).
        """
        session_id = turn.session_id
        await self._settle(session_id)
        if self._closed:
            raise Conflict("the pipeline is shutting down")
        if session_id in self._reserved or turn.turn_id in self._by_turn:
            raise Conflict(busy(session_id))
        self._reserved.add(session_id)
        release: Release | None = None
        place: Release | None = None
        try:
            async with self._starting:
                assistant = await self.authorize(turn.owner, turn.assistant_id)
            options = self._options(turn, assistant)
            release = admit(assistant) if admit is not None else None  # a turn at the door counts
            place = await self.gate.enter()
            if self._closed:
                raise Conflict("the pipeline is shutting down")
            async with self._starting:
                session = await self._ensure_session(turn)
                team = await self._team(turn)
                start_seq = await self.hub.begin(session_id)
                recorder = TurnRecorder(self.store, turn, assistant.id)
                await recorder.begin()
        except BaseException:
            self._reserved.discard(session_id)
            if release is not None:
                release()
            if place is not None:
                place()
            raise
        handle = RunningTurn(self.hub, turn, start_seq)
        self._by_session[session_id] = handle
        self._by_turn[turn.turn_id] = handle
        named = bool(session.title) or session.parent_id is not None  # no title job to run after it
        self._spawn(
            self._turns,
            lambda _: self._run(handle, assistant, options, team, recorder, release, place, named=named),
        )
        log.info("pipeline.turn_started", session_id=session_id, turn_id=turn.turn_id, assistant=assistant.id)
        return handle

    async def _settle(self, session_id: str) -> None:
        """Wait (bounded) for the session's turn to be persisted when its root `stream_end` is out."""
        handle = self._by_session.get(session_id)
        if handle is not None and handle.ending:
            with anyio.move_on_after(SETTLE_WAIT):
                await handle.result()

    def running(self, session_id: str) -> RunningTurn | None:
        return self._by_session.get(session_id)

    def turn(self, turn_id: str) -> RunningTurn | None:
        return self._by_turn.get(turn_id)

    def subscribe(self, session_id: str, *, after_seq: int = 0) -> AsyncIterator[Event]:
        return self.hub.subscribe(session_id, after_seq=after_seq)

    async def respond_permission(
        self,
        session_id: str,
        request_id: str,
        decision: PermissionAnswer,
        message: str | None,
        *,
        actor: str = "user",
    ) -> None:
        """Answer a waiting `permission/request` of `session_id`.

        Raises: NotFound (no such request waiting), UsageError (it is a question).
        """
        await self.permissions.respond_permission(session_id, request_id, decision, message, actor=actor)

    async def respond_question(
        self, session_id: str, request_id: str, text: str, *, actor: str = "user"
    ) -> None:
        """Answer a waiting `question` of `session_id`.

        Raises: NotFound (no such question waiting), UsageError (it is a permission request).
        """
        await self.permissions.respond_question(session_id, request_id, text, actor=actor)

    async def aclose(self) -> None:
        """Interrupt running turns (graceful, then forced after the grace, then cancelled); wait
        for them to end, in bounded time. Idempotent."""
        self._closed = True
        self.gate.close()
        for title in self._titles:
            title.stop.set()
        for title in await _ended(self._titles, FORCE_GRACE):
            title.scope.cancel()
        for handle in list(self._by_turn.values()):
            await handle.interrupt()
        with anyio.move_on_after(self._close_grace):
            for handle in list(self._by_turn.values()):
                await handle.result()
        for handle in list(self._by_turn.values()):
            await handle.interrupt(force=True)
        pending = await _ended(self._turns, FORCE_GRACE)
        for job in pending:
            job.scope.cancel()
        if pending:
            await _ended(pending, FORCE_GRACE)
            log.warning("pipeline.turns_cancelled_on_close", count=len(pending))
        await self.connections.aclose()
        await self.gateway.aclose()

    # -- stages before the turn ------------------------------------------------------------------

    async def authorize(self, owner: str, assistant_id: str) -> Assistant:
        """Stage 1: the assistant, if the owner may use it (`AssistantRegistry.authorize`).

        Raises:
            NotFound: no such assistant, or another owner's private one. ConfigError: broken files.
        """
        return await self.assistants.authorize(owner, assistant_id)

    def _options(self, turn: TurnInput, assistant: Assistant) -> CallOptions:
        """The request's options, which may only choose what the operator offers.

        Raises:
            UsageError: bad metadata, or `options.connector` not among the assistant's
                `connector_options.connectors` (nor its own connector).
        """
        connector = turn.options.connector
        if connector:
            choice = assistant.package.connector_options
            offered = (assistant.connector, *(choice.connectors if choice is not None else ()))
            if connector not in offered:
                listed = ", ".join(c for c in offered if c) or "none"
                raise UsageError(
                    f"options.connector {connector!r} is not offered by assistant {assistant.id!r} "
                    f"(connector_options.connectors: {listed})"
                )
        try:
            return CallOptions.from_turn(turn.options, dict(turn.metadata))
        except ValidationError as exc:
            raise UsageError(f"turn metadata must be JSON data: {exc.errors()[0]['msg']}") from None

    async def _ensure_session(self, turn: TurnInput) -> SessionRecord:
        session = await open_session(self.store, turn)
        if session.owner != turn.owner:
            raise NotFound(f"session {turn.session_id!r} not found")
        return session

    async def _team(self, turn: TurnInput) -> str:
        """The turn's team space, from the owner's memberships; `metadata.team_id` may only pick
        one of the owner's own teams.

        Raises:
            Forbidden: the metadata names a team the owner is not a member of.
        """
        asked = turn.metadata.get("team_id")
        return await self.store.teams.team_for(turn.owner, str(asked) if asked else None)

    # -- the turn --------------------------------------------------------------------------------

    async def _run(
        self,
        handle: RunningTurn,
        assistant: Assistant,
        options: CallOptions,
        team: str,
        recorder: TurnRecorder,
        release: Release | None,
        place: Release,
        *,
        named: bool = False,
    ) -> None:
        """`release` gives back what the caller's `admit` took, `place` the turn's place at the door.
        `named`: the session had a title (or is a sub-agent's) when the turn began: no title job."""
        turn = handle.input
        memory = HookMemory(
            self.store,
            owner=turn.owner,
            team=team,
            session_id=turn.session_id,
            turn_id=turn.turn_id,
        )
        scope = TurnScope(
            owner=turn.owner,
            session_id=turn.session_id,
            turn_id=turn.turn_id,
            metadata=dict(turn.metadata),
            loader=self.loader,
            manager=self.manager,
            store=self.store,
            resume=self._resume,
            hooks=self.hooks,
            memory=memory,
            ids=self._ids,
            emit=lambda events: self._publish(turn, events),
            authorize=lambda agent_id: self.authorize(turn.owner, agent_id),
            gateway=self.gateway,
            allow_host_mcp=self._allow_host_mcp,
            attachments=turn.attachments,
            permissions=self.permissions,
            connections=self.connections,
        )
        runner = assistant.sandbox.runner.name if assistant.sandbox is not None else None
        call = Call(
            scope=scope,
            assistant=assistant,
            stack=CallStack.root(assistant.id),
            builder=TurnBuilder(self._ids, runner=runner),
            messages=turn.messages,
            options=options,
            signal=handle.signal,
        )
        result = CallResult(assistant_id=assistant.id, status="cancelled")
        finish = self._root_finish(handle, recorder)
        try:
            result = await self._calls.run(call, finish)
        except Exception as exc:  # a fault outside the stages' own handling (the store failing mid-turn)
            log.error("pipeline.turn_crashed", turn_id=turn.turn_id, error=type(exc).__name__, exc_info=exc)
            result = CallResult(assistant_id=assistant.id, status="error", error=CRASHED)
            with anyio.CancelScope(shield=True):
                await self._close_crashed(call, finish, result)
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await memory.end_turn()
                except CageError as exc:
                    log.warning("pipeline.context_memory_not_cleared", turn_id=turn.turn_id, error=str(exc))
                self._by_session.pop(turn.session_id, None)
                self._by_turn.pop(turn.turn_id, None)
                self.hub.evict(turn.session_id)  # still reserved: no turn of this session can begin meanwhile
                self._reserved.discard(turn.session_id)
                if release is not None:
                    release()
                place()
                handle.finish(result.redacted())
                log.info(
                    "pipeline.turn_ended",
                    session_id=turn.session_id,
                    turn_id=turn.turn_id,
                    status=result.status,
                )
        if not named:
            self._title(turn, assistant, call.options, result)

    def _title(self, turn: TurnInput, assistant: Assistant, options: CallOptions, result: CallResult) -> None:
        """Name the session in the background after a completed turn (`titles`); cancelled on close."""
        title_id = title_assistant_id(assistant, options) if self._titles_on else None
        if title_id is None or result.status != "completed" or not result.content or self._closed:
            return
        if self.loader.broken(title_id):  # it failed to load a moment ago: a job would only log that
            return

        async def job(stop: anyio.Event) -> None:
            try:
                await make_title(
                    self.store,
                    self.loader,
                    session_id=turn.session_id,
                    title_id=title_id,
                    question=last_user_text(turn.messages),
                    answer=result.content,
                    stop=stop,
                    connections=self.connections,
                )
            except CageError as exc:  # a title is never worth more than a log line
                log.warning("titles.crashed", session_id=turn.session_id, error=type(exc).__name__)

        self._spawn(self._titles, job)

    def _spawn(self, jobs: set[_Job], work: Callable[[anyio.Event], Awaitable[None]]) -> None:
        """Run `work` in the owner's group as one of `jobs`; a fault in it is logged, never raised
        into the group (which would cancel everything else the owner runs)."""
        job = _Job()
        jobs.add(job)

        async def run() -> None:
            try:
                with job.scope:
                    await work(job.stop)
            except Exception as exc:
                log.error("pipeline.job_failed", error=type(exc).__name__, exc_info=exc)
            finally:
                jobs.discard(job)
                job.ended.set()

        self._group.start_soon(run)

    async def _close_crashed(self, call: Call, finish: Finish, result: CallResult) -> None:
        """Give clients the `stream_end` of a turn that failed outside its stages' handling, so no
        one waits for an end that never comes (a store that cannot write it falls back to live)."""
        try:
            events = call.builder.stream_end("error", error=CRASHED)
        except ProtocolError:
            return  # the end went out already
        try:
            await finish(events, result)
        except Exception as exc:  # noqa: BLE001 - best effort; the next start closes the turn
            log.error(
                "pipeline.crashed_turn_not_closed", turn_id=call.scope.turn_id, error=type(exc).__name__
            )

    async def _publish(self, turn: TurnInput, events: Sequence[Event]) -> None:
        await self.hub.publish(turn.session_id, turn.turn_id, events)

    def _root_finish(self, handle: RunningTurn, recorder: TurnRecorder) -> Finish:
        """The root's `stream_end` is written with the turn (messages, usage) in one transaction.
        If that write fails the events still go out, so no client waits for an end that never comes."""
        turn = handle.input

        async def finish(events: list[Event], result: CallResult) -> None:
            handle.end_out()

            async def commit(stamped: list[Event]) -> None:
                await recorder.persist(stamped, result)

            try:
                await self.hub.publish(turn.session_id, turn.turn_id, events, commit=commit)
                return
            except CageError as exc:
                log.error("pipeline.persist_failed", turn_id=turn.turn_id, error=str(exc))
            try:
                await self.hub.publish(turn.session_id, turn.turn_id, events)
            except CageError as exc:
                log.error("pipeline.log_append_failed", turn_id=turn.turn_id, error=str(exc))

                async def live_only(stamped: list[Event]) -> None:
                    return None

                await self.hub.publish(turn.session_id, turn.turn_id, events, commit=live_only)

        return finish
