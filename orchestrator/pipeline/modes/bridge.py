"""The runner bridge: one turn of a CLI runner, from its exec spec to protocol events.

The adapter (pure) says what to run and how to read it; the bridge does the I/O:

1. writes the adapter's files into the workspace (owned by the `sandbox` user);
2. starts the exec (stdin `/dev/null`, bytes, or a pipe the adapter controls);
3. feeds every stdout line to the translator and emits its events;
4. closes stdin once the translator saw the end of the turn, and kills a CLI that lingers;
5. on cancel, timeout or stall: the adapter's stdin interrupt, then its signal to the process
   group, then SIGKILL after the grace period — and still reads what the CLI printed last;
6. hands exit code and stderr tail to `translator.close()` and returns the `TurnOutcome`
   (a CLI the bridge stopped has the `StopReason` as its `stop_reason`);
7. reports the translator's `resume_state` to `on_resume` as soon as it first appears or changes
   (and once more after `close()` if it changed then), so a process that dies mid-turn has
   already saved the runner's session/thread id and the next turn resumes it (a translator that
   counts its changes, `ResumeRevisions`, is read only after the lines that moved the count);
8. the control channel: a translator that is a `ControlSource` surfaces `ControlRequest`s (a
   tool call the CLI holds, a question) after the line that raised them; each is put to the
   turn's `PermissionGate` in its own task (the read loop goes on), and the reply bytes the
   adapter builds from the answer are written to the CLI's stdin. While a request waits the
   stall clock is paused (the turn timeout still runs); cancel, timeout and stall answer every
   waiting request first (deny; an empty answer to a question), then stop the CLI.

`stream_start`/`stream_end` belong to the caller (the pipeline or `cage run`).
"""

from __future__ import annotations

import functools
import signal
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, Literal, Protocol

import anyio
import structlog

from orchestrator.errors import STDERR_TAIL, CageError, StreamLimitError, WorkspaceError
from orchestrator.permissions import Decision, PermissionGate
from orchestrator.permissions.requests import DecidedBy
from orchestrator.pipeline.watchdog import StopReason, TurnLimits, TurnWatchdog, cut_short
from orchestrator.redaction import redact, register_secret
from orchestrator.sandbox.backend import BatchedExec, ExecHandle, ExecItem, ExecSpec, FileEntry
from orchestrator.sandbox.limits import SANDBOX_GID, SANDBOX_UID
from orchestrator.stream import Emit, Event, TurnBuilder
from runners.base import (
    ControlRequest,
    ControlSource,
    PermissionAsk,
    ResumeRevisions,
    RunnerAdapter,
    RunnerExec,
    Translator,
    TurnOutcome,
    TurnRequest,
)

log = structlog.get_logger(__name__)

SaveResume = Callable[[dict[str, str]], Awaitable[None]]
"""Persists a runner's resume state (`ResumeStore.put` bound to the turn's assistant, session, runner)."""
_EMIT_BATCH = 64
"""Events emitted at once at most. In the pipeline each emit is an event-log append, so one emit
per read saves most; but a read makes thousands of events, and events held that long outlive the
young garbage-collector generations (`bench/bridge.py`: 256 at once cost 20-50% more CPU than one
emit per line, 64 about the same)."""
NO_GATE = "refused: this turn has no permission broker to ask"
STOPPED = {
    "cancelled": "refused: the turn was cancelled",
    "timeout": "refused: the turn timed out",
    "stalled": "refused: the turn stalled",
}
"""What a request still waiting when the bridge stops the CLI is refused with, per `StopReason`."""


class TurnSandbox(Protocol):
    """What a runner turn needs of its sandbox, one exec (the runner's files ride in it,
    `ExecSpec.files`); `LeasedSandbox` binds it to a lease."""

    async def exec(self, spec: ExecSpec) -> ExecHandle: ...


def _safe_rel(path: str) -> str:
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if path.startswith("/") or not parts or ".." in parts:
        raise WorkspaceError(path, "runner files must be relative paths inside the workspace")
    return "/".join(parts)


def file_entries(rexec: RunnerExec) -> list[FileEntry]:
    """The adapter's files as archive entries owned by the `sandbox` user."""
    return [
        FileEntry(
            path=_safe_rel(f.path), content=f.content.encode(), mode=f.mode, uid=SANDBOX_UID, gid=SANDBOX_GID
        )
        for f in rexec.files
    ]


def exec_spec(rexec: RunnerExec, grace_seconds: float) -> ExecSpec:
    stdin: bytes | Literal["pipe"] | None = "pipe" if rexec.keep_stdin_open else rexec.stdin
    return ExecSpec(
        argv=rexec.argv,
        env=dict(rexec.env),
        user=rexec.user,
        workdir=rexec.workdir,
        stdin=stdin,
        grace_seconds=grace_seconds,
    )


def stderr_tail(stderr: bytes) -> str:
    text = stderr.decode("utf-8", errors="replace").strip()
    return redact(text[-STDERR_TAIL:])


class _Turn:
    """State of one bridged turn; methods run concurrently inside one task group."""

    def __init__(
        self,
        adapter: RunnerAdapter,
        translator: Translator,
        builder: TurnBuilder,
        handle: ExecHandle,
        rexec: RunnerExec,
        emit: Emit,
        limits: TurnLimits,
        cancel: anyio.Event,
        resumed: Mapping[str, str],
        on_resume: SaveResume | None,
    ) -> None:
        self.adapter, self.translator, self.builder, self.handle = adapter, translator, builder, handle
        self.rexec, self.emit, self.limits = rexec, emit, limits
        self.on_resume = on_resume
        self.resume_saved: dict[str, str] = dict(resumed)
        """The resume state last persisted (the turn's own at start): only a change is written."""
        self.revisions: ResumeRevisions | None = None
        """The translator when it counts its resume state's changes (set by `pump`)."""
        self.revision_seen = -1
        self.resume_seen: object = None
        """The `resume_state` object read last: the same object again (a translator may keep it
        while the state is unchanged) is not compared again. A mid-turn write that failed is so
        retried when the state changes again, or at the turn's end."""
        self.stopped: StopReason | None = None
        self.stdin_open = rexec.keep_stdin_open
        self.watchdog = TurnWatchdog(limits, cancel, held=lambda: bool(self.waiting))
        """Touched once per engine read (a clock read per line is too dear); a request waiting
        for a human holds its stall clock."""
        self.eof = anyio.Event()
        self.finished = False
        """The translator saw the end of the turn (stdin closed, the linger clock runs)."""
        self.killed_lingering = False
        """The CLI reported the end of its turn and was killed for not exiting: not a failure."""
        self.source: ControlSource | None = None
        """The translator when it raises control requests (set by `pump`)."""
        self.gate: PermissionGate | None = None
        self.tasks: anyio.abc.TaskGroup | None = None
        """Where control requests are answered (the turn's task group, set by `run_runner_turn`)."""
        self.waiting: dict[int, tuple[ControlRequest, anyio.CancelScope]] = {}
        """Control requests put to the gate and not answered yet, by a local number."""
        self.asked = 0
        self.stdin_lock = anyio.Lock()

    async def pump(self) -> None:
        """Read stdout to EOF, translating as lines arrive (a whole engine read at a time when the
        handle can hand them out so: `BatchedExec`)."""
        # A runtime-checkable Protocol's isinstance walks its members: once per turn, not per line.
        self.source = self.translator if isinstance(self.translator, ControlSource) else None
        self.revisions = self.translator if isinstance(self.translator, ResumeRevisions) else None
        try:
            if isinstance(self.handle, BatchedExec):
                async for items in self.handle.batches():
                    await self._take(items)
            else:
                async for item in self.handle:
                    await self._take((item,))
        finally:
            self.eof.set()

    async def _take(self, items: Sequence[ExecItem]) -> None:
        """Translate `items` and emit their events at once. Events go out before anything the
        lines led to (a control request put to the gate, a resume state saved, stdin closed), so
        that order is the order of the lines."""
        self.watchdog.touch()
        # Looked up once per read, not per line: a read holds thousands of lines.
        translator, builder, source, emit = self.translator, self.builder, self.source, self.emit
        feed, saves, revisions = translator.feed, self.on_resume is not None, self.revisions
        pending: list[Event] = []
        for item in items:
            if isinstance(item, StreamLimitError):
                pending += builder.error(str(item), "line_too_long", {"limit": item.limit})
                continue
            events = feed(item.decode("utf-8", errors="replace").rstrip("\r"))
            if events:
                pending += events
                if len(pending) >= _EMIT_BATCH:
                    await emit(pending)
                    pending = []
            requests = source.take_requests() if source is not None else None
            resume = False
            if saves and (revisions is None or revisions.resume_revision != self.revision_seen):
                if revisions is not None:
                    self.revision_seen = revisions.resume_revision
                state = translator.resume_state
                if state is not self.resume_seen:
                    self.resume_seen = state
                    resume = bool(state) and state != self.resume_saved
            finished = not self.finished and translator.finished
            if not (requests or resume or finished):
                continue
            if pending:
                await self.emit(pending)
                pending = []
            for request in requests or ():
                self._ask(request)
            if resume:
                await self._save_resume_midturn()
            if finished:
                self.finished = True
                self._start(self._linger)
                await self._close_stdin()
        if pending:
            await self.emit(pending)

    def _ask(self, request: ControlRequest) -> None:
        """Put `request` to the gate in its own task; the read loop goes on meanwhile."""
        self.asked += 1
        number = self.asked
        scope = anyio.CancelScope()
        self.waiting[number] = (request, scope)
        self._start(functools.partial(self._answer, number, request, scope))

    def _start(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        if self.tasks is None:  # pragma: no cover - run_runner_turn always sets it
            raise RuntimeError("bridge work outside a bridged turn")
        self.tasks.start_soon(work)

    async def _answer(self, number: int, request: ControlRequest, scope: anyio.CancelScope) -> None:
        reply: bytes | None = None
        with scope:
            reply = await self._decide(request)
        if self.waiting.pop(number, None) is None or reply is None:
            return  # answered by `stop()` already
        self.watchdog.touch()  # the stall clock restarts with the answer
        await self._write(reply)

    async def _decide(self, request: ControlRequest) -> bytes:
        gate = self.gate
        try:
            if isinstance(request, PermissionAsk):
                if gate is None:
                    return request.reply(Decision(allow=False, by="policy", message=NO_GATE))
                return request.reply(await gate.check(request.request))
            return request.reply(await gate.ask(request.question) if gate is not None else "")
        except CageError as exc:
            log.warning("bridge.gate_failed", runner=self.adapter.name, error=str(exc))
            if isinstance(request, PermissionAsk):
                return request.reply(Decision(allow=False, by="policy", message=f"refused: {exc}"))
            return request.reply("")

    async def _write(self, data: bytes) -> None:
        """Write a control reply to the CLI's stdin, unless it is closed already."""
        async with self.stdin_lock:
            if not self.stdin_open or self.eof.is_set():
                log.info("bridge.reply_dropped", runner=self.adapter.name, reason="stdin closed")
                return
            try:
                await self.handle.write_stdin(data)
            except OSError:
                log.info("bridge.reply_dropped", runner=self.adapter.name, reason="stdin broken")

    async def _settle_waiting(self, reason: StopReason) -> None:
        """Answer every waiting request before the CLI is stopped: deny, or an empty answer."""
        message = STOPPED[reason.value]
        by: DecidedBy = "timeout" if reason is not StopReason.CANCELLED else "user"
        for number in sorted(self.waiting):
            request, scope = self.waiting.pop(number)
            scope.cancel()
            if isinstance(request, PermissionAsk):
                await self._write(request.reply(Decision(allow=False, by=by, message=message)))
            else:
                await self._write(request.reply(""))

    async def _save_resume_midturn(self) -> None:
        """Persist a new resume state now; a failed write is logged and retried at the turn's end."""
        try:
            await self.save_resume()
        except CageError as exc:
            log.warning("bridge.resume_save_failed", runner=self.adapter.name, error=str(exc))

    async def save_resume(self) -> None:
        """Write the translator's resume state if it is non-empty and not the one saved last."""
        state = self.translator.resume_state
        if not state or state == self.resume_saved or self.on_resume is None:
            return
        await self.on_resume(dict(state))  # the translator's may be the one it keeps
        self.resume_saved = dict(state)

    async def _close_stdin(self) -> None:
        async with self.stdin_lock:
            if self.stdin_open:
                self.stdin_open = False
                await self.handle.close_stdin()

    async def watch(self) -> None:
        """Stop the CLI on cancel, timeout or stall."""
        reason = await self.watchdog.watch()
        if reason is StopReason.STALLED:
            await self.emit(self.builder.stalled(self.watchdog.idle_ms(), "no output from the runner"))
        await self.stop(reason)

    async def _linger(self) -> None:
        """Kill the CLI when it lingers after it reported the end of its turn."""
        with anyio.move_on_after(self.limits.linger_seconds):
            await self.eof.wait()
        if not self.eof.is_set():
            log.info("bridge.kill_lingering", runner=self.adapter.name)
            self.killed_lingering = True
            await self.handle.aclose()

    async def stop(self, reason: StopReason) -> None:
        """Graceful first (stdin interrupt, then the adapter's signal), SIGKILL after the grace."""
        self.stopped = reason
        await self._settle_waiting(reason)
        policy = self.adapter.cancel
        if policy.stdin_interrupt is not None and self.stdin_open:
            try:
                async with self.stdin_lock:
                    await self.handle.write_stdin(policy.stdin_interrupt)
                with anyio.move_on_after(policy.grace_seconds / 2):
                    await self.eof.wait()
                await self._close_stdin()
            except OSError:
                log.debug("bridge.stdin_closed", runner=self.adapter.name)
        if not self.eof.is_set():
            await self.handle.signal(signal.Signals(policy.signal))
            with anyio.move_on_after(policy.grace_seconds):
                await self.eof.wait()
        if not self.eof.is_set():
            await self.handle.aclose()


async def run_runner_turn(
    adapter: RunnerAdapter,
    turn: TurnRequest,
    sandbox: TurnSandbox,
    builder: TurnBuilder,
    emit: Emit,
    *,
    cancel: anyio.Event | None = None,
    limits: TurnLimits | None = None,
    workspace_root: str = "/workspace",
    on_resume: SaveResume | None = None,
    gate: PermissionGate | None = None,
) -> TurnOutcome:
    """Run one turn of `adapter` in `sandbox`, emitting its events; never raises for CLI failures.

    `on_resume` gets each new resume state as the runner reports it (mid-turn writes that fail
    are logged; the final one raises like any store failure). `gate` decides the tool calls and
    answers the questions the runner surfaces; when it `asks`, the turn is built with
    `ask_permissions` so the adapter starts its CLI in a mode that asks.

    Raises:
        SandboxError: the sandbox could not run the exec at all (engine failure).
        WorkspaceError: the adapter asked for a file outside the workspace.
    """
    if gate is not None and gate.asks and not turn.ask_permissions:
        turn = turn.model_copy(update={"ask_permissions": True})
    rexec = adapter.build_exec(turn)
    for name in rexec.secret_env:
        register_secret(rexec.env.get(name))
    spec = exec_spec(rexec, adapter.cancel.grace_seconds)
    if entries := file_entries(rexec):  # written by the exec itself before the CLI starts
        spec = spec.model_copy(update={"files": tuple(entries), "files_dir": workspace_root})
    translator = adapter.translator(builder, turn)
    handle = await sandbox.exec(spec)
    limits = limits or TurnLimits()
    cancel = cancel or anyio.Event()
    state = _Turn(adapter, translator, builder, handle, rexec, emit, limits, cancel, turn.resume, on_resume)
    state.gate = gate
    async with handle:
        if rexec.keep_stdin_open and rexec.stdin:
            await handle.write_stdin(rexec.stdin)
        async with anyio.create_task_group() as tg:
            state.tasks = tg
            tg.start_soon(state.watch)
            await state.pump()
            tg.cancel_scope.cancel()
        with anyio.CancelScope(shield=True):
            exit_code: int | None = await handle.wait()
    tail = stderr_tail(handle.stderr)
    if state.killed_lingering:
        exit_code = 0  # the turn was over; the kill was ours
    events = translator.close(exit_code, tail, cancelled=state.stopped is not None)
    if events:
        await emit(events)
    await state.save_resume()
    outcome = cut_short(translator.outcome, state.stopped, limits, "runner stalled: no output")
    if outcome.error is not None and state.stopped in (StopReason.TIMEOUT, StopReason.STALLED):
        await emit(builder.error(outcome.error, f"turn_{state.stopped.value}"))
    elif state.stopped is StopReason.CANCELLED:
        outcome = outcome.model_copy(update={"stop_reason": StopReason.CANCELLED.value})
    return outcome
