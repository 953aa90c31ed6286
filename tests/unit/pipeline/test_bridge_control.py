"""The bridge's control channel: requests a translator surfaces are put to the gate concurrently
and answered on the CLI's stdin; the stall clock waits with them; cancel answers them first."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from orchestrator.permissions import Decision, Question, ToolRequest
from orchestrator.pipeline.modes.bridge import NO_GATE, run_runner_turn
from orchestrator.pipeline.watchdog import StopReason, TurnLimits
from orchestrator.stream import CountingIds, Event, TurnBuilder
from runners.base import ControlRequest, PermissionAsk, QuestionAsk, RunnerExec, TurnRequest
from tests.unit.pipeline.test_bridge import TURN, FakeAdapter, FakeHandle, FakeSandbox, LineTranslator


def _permission_reply(decision: Decision) -> bytes:
    return f"{'allow' if decision.allow else 'deny'}:{decision.by}:{decision.message}\n".encode()


def _answer_reply(answer: str) -> bytes:
    return f"answer:{answer}\n".encode()


class ControlTranslator(LineTranslator):
    """`ask:<command>` holds a bash call; `q:<text>` asks a question; the rest as `LineTranslator`."""

    def __init__(self, builder: TurnBuilder) -> None:
        super().__init__(builder)
        self.requests: list[ControlRequest] = []

    def feed(self, line: str) -> list[Event]:
        if line.startswith("ask:"):
            command = line[4:]
            request = ToolRequest(tool="bash", input={"command": command}, subject=command, runner="fake")
            self.requests.append(PermissionAsk(request, _permission_reply))
            return []
        if line.startswith("q:"):
            self.requests.append(QuestionAsk(Question(text=line[2:]), _answer_reply))
            return []
        return super().feed(line)

    def take_requests(self) -> list[ControlRequest]:
        taken, self.requests = self.requests, []
        return taken


class ControlAdapter(FakeAdapter):
    def __init__(self) -> None:
        super().__init__(pipe=True, interrupt=True)
        self.turns: list[TurnRequest] = []

    def build_exec(self, turn: TurnRequest) -> RunnerExec:
        self.turns.append(turn)
        return super().build_exec(turn)

    def translator(self, builder: TurnBuilder, turn: TurnRequest) -> ControlTranslator:
        return ControlTranslator(builder)


class ReplyHandle(FakeHandle):
    """Ends its output once `replies` control replies were written to its stdin."""

    def __init__(self, script: Sequence[bytes | float], replies: int = 1) -> None:
        super().__init__(script)
        self.replies = replies

    async def write_stdin(self, data: bytes) -> None:
        await super().write_stdin(data)
        if data.startswith((b"allow", b"deny", b"answer")):
            self.replies -= 1
            if self.replies == 0:
                self._stop.set()


class Gate:
    """A gate whose answers wait for `release` (a human who takes a while)."""

    def __init__(self, decision: Decision | None = None, answer: str = "") -> None:
        self.decision = decision or Decision(allow=True, by="user")
        self.answer = answer
        self.release = anyio.Event()
        self.checked: list[ToolRequest] = []
        self.questions: list[Question] = []
        self.asks = True
        self.two_waiting = anyio.Event()

    async def check(self, request: ToolRequest) -> Decision:
        self.checked.append(request)
        self._note()
        await self.release.wait()
        return self.decision

    async def ask(self, question: Question) -> str:
        self.questions.append(question)
        self._note()
        await self.release.wait()
        return self.answer

    def _note(self) -> None:
        if len(self.checked) + len(self.questions) >= 2:
            self.two_waiting.set()


async def _turn(
    handle: FakeHandle,
    gate: Gate | None,
    *,
    adapter: ControlAdapter | None = None,
    limits: TurnLimits | None = None,
    cancel: anyio.Event | None = None,
    release_on_text: str | None = None,
) -> tuple[list[Event], str | None]:
    events: list[Event] = []

    async def emit(batch: Sequence[Event]) -> None:
        events.extend(batch)
        seen = release_on_text is not None and any(
            getattr(e.props, "content", None) == release_on_text for e in batch
        )
        if gate is not None and seen:
            gate.release.set()

    with anyio.fail_after(10):
        result = await run_runner_turn(
            adapter or ControlAdapter(),
            TURN,
            FakeSandbox(handle),
            TurnBuilder(CountingIds(), runner="fake"),
            emit,
            cancel=cancel,
            limits=limits,
            gate=gate,
        )
    return events, result.stop_reason


async def test_output_keeps_flowing_while_the_gate_decides_and_the_reply_goes_to_stdin() -> None:
    gate = Gate(Decision(allow=False, by="user", message="not today"))
    handle = ReplyHandle([b"ask:rm -rf /", b"text:meanwhile", 30.0])
    # The gate answers only once the line after the request was emitted: a read loop blocked on
    # the gate would never get there (fail_after).
    await _turn(handle, gate, release_on_text="meanwhile")
    assert [r.subject for r in gate.checked] == ["rm -rf /"]
    assert handle.stdin == [b"hello\n", b"deny:user:not today\n"]


async def test_a_question_is_answered_with_the_gates_text() -> None:
    gate = Gate(answer="blue")
    gate.release.set()
    handle = ReplyHandle([b"q:Which colour?", 30.0])
    await _turn(handle, gate)
    assert [q.text for q in gate.questions] == ["Which colour?"]
    assert handle.stdin[-1] == b"answer:blue\n"


async def test_a_waiting_request_pauses_the_stall_clock_but_not_the_turn_timeout() -> None:
    gate = Gate()

    async def human() -> None:
        await anyio.sleep(1.2)  # four stall timeouts without output
        gate.release.set()

    handle = ReplyHandle([b"ask:ls", 30.0])
    async with anyio.create_task_group() as tg:
        tg.start_soon(human)
        events, stopped = await _turn(handle, gate, limits=TurnLimits(stall_timeout=0.3))
    assert stopped is None, handle.stdin
    assert not any(e.type == "event" and e.props.event == "turn/stalled" for e in events)  # type: ignore[union-attr]
    assert handle.stdin[-1] == b"allow:user:\n"

    never = Gate()
    handle = FakeHandle([b"ask:ls", 30.0])
    _, stopped = await _turn(handle, never, limits=TurnLimits(turn_timeout=0.4))
    assert stopped == StopReason.TIMEOUT
    assert handle.stdin[1:] == [b"deny:timeout:refused: the turn timed out\n", b"INTERRUPT\n"]


async def test_cancel_answers_waiting_requests_as_deny_before_the_interrupt() -> None:
    gate = Gate()
    cancel = anyio.Event()
    handle = FakeHandle([b"ask:make deploy", b"q:Sure?", b"text:waiting", 30.0])

    async def emit_then_cancel() -> None:
        await gate.two_waiting.wait()
        cancel.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(emit_then_cancel)
        _, stopped = await _turn(handle, gate, cancel=cancel)
    assert stopped == StopReason.CANCELLED
    assert handle.stdin[1:] == [b"deny:user:refused: the turn was cancelled\n", b"answer:\n", b"INTERRUPT\n"]


async def test_without_a_gate_a_surfaced_request_is_refused() -> None:
    handle = ReplyHandle([b"ask:ls", 30.0])
    await _turn(handle, None)
    assert handle.stdin[-1] == f"deny:policy:{NO_GATE}\n".encode()


async def test_a_gate_that_asks_builds_the_turn_with_ask_permissions() -> None:
    adapter = ControlAdapter()
    await _turn(FakeHandle([b"end"]), Gate(), adapter=adapter)
    quiet = Gate()
    quiet.asks = False
    await _turn(FakeHandle([b"end"]), quiet, adapter=adapter)
    await _turn(FakeHandle([b"end"]), None, adapter=adapter)
    assert [t.ask_permissions for t in adapter.turns] == [True, False, False]
