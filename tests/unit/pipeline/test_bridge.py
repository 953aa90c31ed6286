"""The runner bridge against a fake sandbox: translation, stdin handling, cancel, timeout, stall."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Self

import anyio
import pytest

from orchestrator.errors import StreamLimitError, WorkspaceError
from orchestrator.pipeline.modes.bridge import run_runner_turn
from orchestrator.pipeline.watchdog import StopReason, TurnLimits
from orchestrator.sandbox.backend import ExecItem, ExecSpec
from orchestrator.store import StoreError
from orchestrator.stream import CountingIds, Event, TurnBuilder, dump_event, validate_stream
from runners.base import CancelPolicy, FileWrite, RunnerExec, Supports, TurnOutcome, TurnRequest


class FakeHandle:
    """A scripted process: yields `lines` (float = sleep that long), exits with `exit_code`."""

    def __init__(self, script: Sequence[bytes | float | StreamLimitError], exit_code: int = 0) -> None:
        self.script = list(script)
        self.exit_code = exit_code
        self.stdin: list[bytes] = []
        self.stdin_closed = False
        self.signals: list[signal.Signals] = []
        self.killed = False
        self._stop = anyio.Event()
        self.exited = False

    async def _lines(self) -> AsyncIterator[ExecItem]:
        for item in self.script:
            if self._stop.is_set():
                return
            if isinstance(item, float):
                with anyio.move_on_after(item):
                    await self._stop.wait()
                continue
            yield item
        self.exited = True

    def __aiter__(self) -> AsyncIterator[ExecItem]:
        return self._lines()

    @property
    def stderr(self) -> bytes:
        return b"boom: ANTHROPIC_API_KEY=sk-ant-secretsecretsecret" if self.exit_code else b""

    async def write_stdin(self, data: bytes) -> None:
        self.stdin.append(data)
        if data == b"INTERRUPT\n":
            self.exit_code = 0
            self._stop.set()

    async def close_stdin(self) -> None:
        self.stdin_closed = True

    async def signal(self, sig: signal.Signals) -> None:
        self.signals.append(sig)
        self.exit_code = 130
        self._stop.set()

    async def wait(self) -> int:
        return self.exit_code

    async def aclose(self) -> None:
        if not self._stop.is_set() and not self.exited:
            self.killed = True
            self.exit_code = 137
            self._stop.set()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class FakeSandbox:
    def __init__(self, handle: FakeHandle) -> None:
        self.handle = handle
        self.specs: list[ExecSpec] = []

    async def exec(self, spec: ExecSpec) -> FakeHandle:
        self.specs.append(spec)
        return self.handle


class LineTranslator:
    """`text:<x>` -> text delta, `end` -> finished; anything else -> raw."""

    def __init__(self, builder: TurnBuilder) -> None:
        self.builder = builder
        self.finished = False
        self._outcome: TurnOutcome | None = None

    def feed(self, line: str) -> list[Event]:
        if line.startswith("text:"):
            return self.builder.text(line[5:])
        if line == "end":
            self.finished = True
            return []
        return self.builder.raw("line", line, runner="fake")

    def close(self, exit_code: int | None, stderr_tail: str, *, cancelled: bool = False) -> list[Event]:
        if cancelled:
            self._outcome = TurnOutcome(status="cancelled")
            return []
        if exit_code:
            self._outcome = TurnOutcome(status="error", error=stderr_tail)
            return self.builder.error(f"exit {exit_code}: {stderr_tail}", "runner_failed")
        self._outcome = TurnOutcome(status="completed")
        return []

    @property
    def outcome(self) -> TurnOutcome:
        assert self._outcome is not None
        return self._outcome

    @property
    def resume_state(self) -> dict[str, str]:
        return {"session": "s-1"}


class FakeAdapter:
    name = "fake"
    image = "tools"
    supports = Supports()

    def __init__(
        self, *, pipe: bool = False, interrupt: bool = False, files: tuple[FileWrite, ...] = ()
    ) -> None:
        self.pipe = pipe
        self.files = files
        self.cancel = CancelPolicy(grace_seconds=0.4, stdin_interrupt=b"INTERRUPT\n" if interrupt else None)

    def build_exec(self, turn: TurnRequest) -> RunnerExec:
        return RunnerExec(
            argv=("fake", turn.prompt),
            env={"KEY": "sk-ant-secretsecretsecret"},
            secret_env=("KEY",),
            stdin=b"hello\n" if self.pipe else None,
            keep_stdin_open=self.pipe,
            files=self.files,
        )

    def translator(self, builder: TurnBuilder, turn: TurnRequest) -> LineTranslator:
        return LineTranslator(builder)


TURN = TurnRequest(assistant_id="a.b", owner="o", session_id="c", turn_id="t", prompt="hi")


async def _run(
    handle: FakeHandle,
    adapter: FakeAdapter,
    *,
    cancel_after: float | None = None,
    limits: TurnLimits | None = None,
) -> tuple[list[Event], FakeSandbox, str | None, str]:
    events: list[Event] = []
    builder = TurnBuilder(CountingIds(), runner="fake")

    async def emit(batch: Sequence[Event]) -> None:
        events.extend(batch)

    sandbox = FakeSandbox(handle)
    cancel = anyio.Event()
    events += builder.stream_start("a.b")
    async with anyio.create_task_group() as tg:
        if cancel_after is not None:

            async def _later() -> None:
                await anyio.sleep(cancel_after)
                cancel.set()

            tg.start_soon(_later)
        result = await run_runner_turn(
            FakeAdapter() if adapter is None else adapter,
            TURN,
            sandbox,
            builder,
            emit,
            cancel=cancel,
            limits=limits,
        )
        tg.cancel_scope.cancel()
    events += builder.stream_end(result.status, error=result.error)
    assert validate_stream([dump_event(e) for e in _stamp(events)]) == []
    return events, sandbox, result.stop_reason, result.status


def _stamp(events: list[Event]) -> list[Event]:
    return [
        e.model_copy(update={"seq": i + 1, "ts": i + 1, "session_id": "s", "turn_id": "t"})
        for i, e in enumerate(events)
    ]


def _texts(events: list[Event]) -> str:
    return "".join(getattr(e.props, "content", "") or "" for e in events if e.type == "text")


async def test_lines_become_events_and_outcome_completed() -> None:
    events, sandbox, stopped, status = await _run(
        FakeHandle([b"text:he", b"text:llo", b"weird"]), FakeAdapter()
    )
    assert _texts(events) == "hello"
    assert [e.props.event for e in events if e.type == "event"].count("runner/raw") == 1  # type: ignore[union-attr]
    assert (stopped, status) == (None, "completed")
    assert sandbox.specs[0].stdin is None and sandbox.specs[0].argv == ("fake", "hi")


async def test_pipe_stdin_written_then_closed_when_finished() -> None:
    handle = FakeHandle([b"text:x", b"end", 0.05])
    _, _, _, status = await _run(handle, FakeAdapter(pipe=True))
    assert handle.stdin == [b"hello\n"] and handle.stdin_closed
    assert status == "completed" and not handle.killed


async def test_lingering_cli_is_killed_after_its_turn() -> None:
    handle = FakeHandle([b"end", 30.0])
    _, _, stopped, status = await _run(handle, FakeAdapter(), limits=TurnLimits(linger_seconds=0.3))
    assert handle.killed and stopped is None
    assert status == "completed"  # exit 137 from our own kill is not the CLI failing


async def test_cancel_uses_stdin_interrupt_first() -> None:
    handle = FakeHandle([b"text:a", 30.0, b"text:never"])
    events, _, stopped, status = await _run(handle, FakeAdapter(pipe=True, interrupt=True), cancel_after=0.2)
    assert stopped == StopReason.CANCELLED and status == "cancelled"
    assert handle.stdin[-1] == b"INTERRUPT\n" and handle.signals == []
    assert "never" not in _texts(events)


async def test_cancel_signals_then_outcome_cancelled() -> None:
    handle = FakeHandle([b"text:a", 30.0])
    _, _, stopped, status = await _run(handle, FakeAdapter(), cancel_after=0.2)
    assert handle.signals == [signal.SIGINT]
    assert (stopped, status) == (StopReason.CANCELLED, "cancelled")


async def test_timeout_stops_the_turn_with_an_error() -> None:
    handle = FakeHandle([b"text:a", 30.0])
    events, _, stopped, status = await _run(handle, FakeAdapter(), limits=TurnLimits(turn_timeout=0.3))
    assert (stopped, status) == (StopReason.TIMEOUT, "error")
    errors = [e for e in events if e.type == "error"]
    assert errors and errors[-1].props.code == "turn_timeout"  # type: ignore[union-attr]


async def test_stall_emits_turn_stalled() -> None:
    handle = FakeHandle([b"text:a", 30.0])
    events, _, stopped, _ = await _run(handle, FakeAdapter(), limits=TurnLimits(stall_timeout=0.3))
    assert stopped == StopReason.STALLED
    assert any(e.type == "event" and e.props.event == "turn/stalled" for e in events)  # type: ignore[union-attr]


async def test_too_long_line_is_an_error_event_and_the_stream_goes_on() -> None:
    events, _, _, status = await _run(FakeHandle([StreamLimitError(1024), b"text:after"]), FakeAdapter())
    codes = [e.props.code for e in events if e.type == "error"]  # type: ignore[union-attr]
    assert codes == ["line_too_long"] and _texts(events) == "after" and status == "completed"


async def test_failure_outcome_has_redacted_stderr() -> None:
    events, _, _, status = await _run(FakeHandle([b"text:a"], exit_code=1), FakeAdapter())
    assert status == "error"
    dumped = str([dump_event(e) for e in events])
    assert "sk-ant-secretsecretsecret" not in dumped and "exit 1" in dumped


async def test_files_are_written_as_the_sandbox_user_by_the_clis_own_exec() -> None:
    adapter = FakeAdapter(files=(FileWrite(path=".cage-state/runner/x.json", content="{}"),))
    _, sandbox, _, _ = await _run(FakeHandle([b"end"]), adapter)
    (spec,) = sandbox.specs
    assert spec.files_dir == "/workspace" and spec.files[0].path == ".cage-state/runner/x.json"
    assert spec.files[0].uid == 1000 and spec.files[0].content == b"{}"


@pytest.mark.parametrize("path", ["../etc/passwd", "/etc/passwd", "a/../../b"])
async def test_files_outside_the_workspace_are_refused(path: str) -> None:
    adapter = FakeAdapter(files=(FileWrite(path=path, content="x"),))
    sandbox = FakeSandbox(FakeHandle([b"end"]))

    async def emit(batch: Sequence[Event]) -> None:
        raise AssertionError("nothing may be emitted")

    with pytest.raises(WorkspaceError):
        await run_runner_turn(adapter, TURN, sandbox, TurnBuilder(CountingIds()), emit)
    assert sandbox.specs == []


class SessionTranslator(LineTranslator):
    """`session:<id>` reports a resume state, as a CLI's init line does."""

    def __init__(self, builder: TurnBuilder) -> None:
        super().__init__(builder)
        self.session = ""

    def feed(self, line: str) -> list[Event]:
        if line.startswith("session:"):
            self.session = line[8:]
            return []
        return super().feed(line)

    @property
    def resume_state(self) -> dict[str, str]:
        return {"session": self.session} if self.session else {}


class SessionAdapter(FakeAdapter):
    def translator(self, builder: TurnBuilder, turn: TurnRequest) -> SessionTranslator:
        return SessionTranslator(builder)


async def test_resume_state_is_reported_as_it_appears_and_only_when_it_changes() -> None:
    saved: list[dict[str, str]] = []
    seen_at: list[str] = []
    events: list[Event] = []

    async def emit(batch: Sequence[Event]) -> None:
        events.extend(batch)

    async def on_resume(state: dict[str, str]) -> None:
        saved.append(state)
        seen_at.append(_texts(events))

    handle = FakeHandle([b"session:s-0", b"text:a", b"session:s-2", b"session:s-2", b"text:b"])
    turn = TURN.model_copy(update={"resume": {"session": "s-0"}})  # s-0 is what the turn started with
    await run_runner_turn(
        SessionAdapter(), turn, FakeSandbox(handle), TurnBuilder(CountingIds()), emit, on_resume=on_resume
    )
    assert saved == [{"session": "s-2"}]  # the unchanged s-0 and the repeated s-2 are not written
    assert seen_at == ["a"]  # while the turn ran: after the first text, before the second


class CountedSessionTranslator(SessionTranslator):
    """Counts its resume state's changes (`ResumeRevisions`) and the reads of it; `quiet:<id>`
    changes the state without counting, as a translator that forgot to would."""

    def __init__(self, builder: TurnBuilder) -> None:
        super().__init__(builder)
        self.resume_revision = 0
        self.reads = 0

    def feed(self, line: str) -> list[Event]:
        if line.startswith("quiet:"):
            self.session = line[6:]
            return []
        if line.startswith("session:"):
            self.resume_revision += 1
        return super().feed(line)

    @property
    def resume_state(self) -> dict[str, str]:
        self.reads += 1
        return {"session": self.session} if self.session else {}


async def test_a_translator_counting_its_resume_changes_is_read_only_after_lines_that_moved_it() -> None:
    saved: list[tuple[dict[str, str], str]] = []
    events: list[Event] = []
    builder = TurnBuilder(CountingIds())
    translator = CountedSessionTranslator(builder)

    class CountedAdapter(FakeAdapter):
        def translator(self, builder: TurnBuilder, turn: TurnRequest) -> CountedSessionTranslator:
            return translator

    async def emit(batch: Sequence[Event]) -> None:
        events.extend(batch)

    async def on_resume(state: dict[str, str]) -> None:
        saved.append((state, _texts(events)))

    lines = [b"text:a", b"session:s-1", b"text:b", b"text:c", b"quiet:s-2", b"text:d", b"session:s-3"]
    handle = FakeHandle(lines + [b"text:e"] * 50)
    await run_runner_turn(CountedAdapter(), TURN, FakeSandbox(handle), builder, emit, on_resume=on_resume)
    # s-2 changed nothing the bridge watches: it is not written mid-turn, s-3 replaces it
    assert saved == [({"session": "s-1"}, "a"), ({"session": "s-3"}, "abcd")]
    # after the first line, twice for each counted change (to see it, to save it), at the turn's end
    assert translator.reads == 1 + 2 * 2 + 1


async def test_a_failed_mid_turn_resume_write_is_retried_at_the_end() -> None:
    calls: list[dict[str, str]] = []

    async def on_resume(state: dict[str, str]) -> None:
        calls.append(state)
        if len(calls) == 1:
            raise StoreError("database unavailable (OperationalError: database is locked)")

    async def emit(batch: Sequence[Event]) -> None:
        return None

    handle = FakeHandle([b"session:s-1", b"text:a"])
    result = await run_runner_turn(
        SessionAdapter(), TURN, FakeSandbox(handle), TurnBuilder(CountingIds()), emit, on_resume=on_resume
    )
    assert result.status == "completed"  # the turn went on
    assert calls == [{"session": "s-1"}, {"session": "s-1"}]


async def test_a_turn_cut_mid_way_has_already_reported_its_resume_state() -> None:
    saved: list[dict[str, str]] = []

    async def on_resume(state: dict[str, str]) -> None:
        saved.append(state)

    async def emit(batch: Sequence[Event]) -> None:
        return None

    handle = FakeHandle([b"session:s-9", b"text:thinking", 30.0, b"text:never"])
    with anyio.move_on_after(0.3):  # the process dies: no close(), no end of turn
        await run_runner_turn(
            SessionAdapter(), TURN, FakeSandbox(handle), TurnBuilder(CountingIds()), emit, on_resume=on_resume
        )
    assert saved == [{"session": "s-9"}]


class BatchedHandle(FakeHandle):
    """A `BatchedExec`: each list in the script is one engine read, handed out whole."""

    def __init__(self, reads: Sequence[Sequence[bytes | StreamLimitError]], exit_code: int = 0) -> None:
        super().__init__([], exit_code)
        self.reads = [list(read) for read in reads]

    async def _batches(self) -> AsyncIterator[Sequence[ExecItem]]:
        for read in self.reads:
            yield read
        self.exited = True

    def batches(self) -> AsyncIterator[Sequence[ExecItem]]:
        return self._batches()

    def __aiter__(self) -> AsyncIterator[ExecItem]:
        raise AssertionError("a batched handle is read by batch")


async def test_a_read_of_many_lines_is_one_emit_with_the_same_events_as_line_by_line() -> None:
    lines: list[bytes | StreamLimitError] = [b"text:he", b"weird", StreamLimitError(8), b"text:llo"]
    by_line, _, _, _ = await _run(FakeHandle(lines), FakeAdapter())
    batches: list[int] = []
    builder = TurnBuilder(CountingIds(), runner="fake")
    by_read: list[Event] = builder.stream_start("a.b")

    async def emit(batch: Sequence[Event]) -> None:
        batches.append(len(batch))
        by_read.extend(batch)

    result = await run_runner_turn(FakeAdapter(), TURN, FakeSandbox(BatchedHandle([lines])), builder, emit)
    translated = len(by_read) - 1  # after the caller's stream_start
    by_read += builder.stream_end(result.status)
    assert batches == [translated]
    assert _timeless(by_read) == _timeless(by_line)


def _timeless(events: list[Event]) -> list[dict[str, object]]:
    """The events as JSON, without the durations the clock put in them."""
    dumped = [dump_event(e) for e in events]
    for event in dumped:
        props = event["props"]
        if isinstance(props, dict):
            props.pop("duration_ms", None)
    return dumped


async def test_within_one_read_what_a_line_leads_to_comes_after_the_events_of_the_lines_before_it() -> None:
    events: list[Event] = []
    seen_at: list[str] = []
    handle = BatchedHandle([[b"text:a", b"session:s-1", b"text:b", b"end", b"text:c"]])

    async def emit(batch: Sequence[Event]) -> None:
        events.extend(batch)

    async def on_resume(state: dict[str, str]) -> None:
        seen_at.append(_texts(events))

    class ClosingHandle(BatchedHandle):
        async def close_stdin(self) -> None:
            seen_at.append(f"closed after {_texts(events)}")

    handle = ClosingHandle(handle.reads)
    await run_runner_turn(
        SessionAdapter(pipe=True),
        TURN,
        FakeSandbox(handle),
        TurnBuilder(CountingIds()),
        emit,
        on_resume=on_resume,
    )
    assert seen_at == ["a", "closed after ab"]
    assert _texts(events) == "abc"
