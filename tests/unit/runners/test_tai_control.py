"""tai asking Cage: control lines out, answer lines in — the translator's mapping, the in-box
gate, and `cage-tai run` as a real subprocess against the fake model server."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from orchestrator.permissions import Decision, Question, ToolRequest
from orchestrator.stream import CountingIds, TurnBuilder
from runners.base import ControlRequest, PermissionAsk, QuestionAsk, TurnRequest
from runners.tai import TaiAdapter, TaiTranslator
from runners.tai.control import answer_line, decision_line, permission_line, question_line
from runners.tai.incontainer.gate import NO_HOST, StdioGate
from tests.fakes.model_server import FakeModelServer
from tests.unit.runners.test_tai_cli import CAGE_TAI, env, events_of, turn
from tests.unit.runners.test_tai_exec import turn as exec_turn

TURN = TurnRequest(assistant_id="unit.tai", owner="o", session_id="c", turn_id="t", prompt="go")
PERMISSION = (
    '{"cage_control":"permission","id":"p1","request":{"tool":"bash","input":{"command":"echo made > made.txt"},'
    '"subject":"echo made > made.txt","call_id":"toolu_1"}}'
)
QUESTION = (
    '{"cage_control":"question","id":"q1","question":{"text":"Which colour?","options":["red","blue"]}}'
)


def _translator() -> TaiTranslator:
    return TaiTranslator(TurnBuilder(CountingIds(), runner="tai"), TURN)


def test_control_lines_become_requests_whose_replies_are_answer_lines() -> None:
    translator = _translator()
    assert translator.feed(PERMISSION) == [] and translator.feed(QUESTION) == []
    permission, question = translator.take_requests()
    assert translator.take_requests() == []
    assert isinstance(permission, PermissionAsk) and isinstance(question, QuestionAsk)
    assert permission.request == ToolRequest(
        tool="bash",
        input={"command": "echo made > made.txt"},
        subject="echo made > made.txt",
        call_id="toolu_1",
        runner="tai",
    )
    refused = json.loads(permission.reply(Decision(allow=False, by="user", message="no", rule="bash: *")))
    assert refused == {"id": "p1", "allow": False, "by": "user", "message": "no", "rule": "bash: *"}
    assert question.question == Question(text="Which colour?", options=("red", "blue"))
    assert json.loads(question.reply("blue")) == {"id": "q1", "answer": "blue"}


@pytest.mark.parametrize(
    "line",
    [
        '{"cage_control":"permission","id":"p1"}',
        '{"cage_control":"permission","id":"p1","request":{"tool":""}}',
        '{"cage_control":"dance","id":"x"}',
        '{"cage_control": not json',
    ],
)
def test_malformed_control_lines_are_raw_events(line: str) -> None:
    translator = _translator()
    events = translator.feed(line)
    assert [e.props.event for e in events] == ["runner/raw"]  # type: ignore[union-attr]
    assert translator.take_requests() == []


def test_the_adapter_keeps_stdin_open_only_for_an_asking_turn() -> None:
    quiet = TaiAdapter().build_exec(exec_turn())
    asking = TaiAdapter().build_exec(exec_turn(ask_permissions=True))
    assert not quiet.keep_stdin_open and quiet.stdin is not None and not quiet.stdin.endswith(b"\n")
    assert asking.keep_stdin_open and asking.stdin is not None and asking.stdin.endswith(b"\n")
    assert json.loads(asking.stdin)["ask_permissions"] is True
    assert json.loads(quiet.stdin)["ask_permissions"] is False


async def test_the_stdio_gate_round_trips_and_refuses_once_stdin_ends() -> None:
    written: list[str] = []
    gate = StdioGate(_collect(written))
    async with anyio.create_task_group() as tg:

        async def host() -> None:
            while len(written) < 1:
                await anyio.lowlevel.checkpoint()
            gate.feed(b'{"id":"nobody"}\n')  # an id nobody waits for: ignored
            gate.feed(decision_line("p1", Decision(allow=True, by="user")))
            while len(written) < 2:
                await anyio.lowlevel.checkpoint()
            gate.feed(answer_line("q2", "blue"))

        tg.start_soon(host)
        decision = await gate.check(ToolRequest(tool="bash", subject="ls"))
        answer = await gate.ask(Question(text="Which colour?"))
    assert decision.allow and answer == "blue"
    assert json.loads(written[0]) == json.loads(permission_line("p1", ToolRequest(tool="bash", subject="ls")))
    assert json.loads(written[1]) == json.loads(question_line("q2", Question(text="Which colour?")))
    gate.close()
    assert await gate.check(ToolRequest(tool="bash")) == Decision(allow=False, by="policy", message=NO_HOST)
    assert await gate.ask(Question(text="?")) == ""


def _collect(into: list[str]) -> Callable[[str], Any]:
    async def write(line: str) -> None:
        into.append(line)

    return write


# -- the real CLI ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer("text", host="127.0.0.1") as running:
        running.add_scenario("make", [{"shell": "echo made > made.txt"}, {"text": "done"}])
        running.add_scenario(
            "ask",
            [
                {"tool": "question", "args": {"question": "Which colour?", "options": ["red", "blue"]}},
                {"text": "ok"},
            ],
        )
        yield running


Answerer = Callable[[ControlRequest], bytes | None]
"""The host's side: the reply to write for a request (None: write nothing, close stdin instead)."""


def drive(
    server: FakeModelServer, scenario: str, workdir: Path, answer: Answerer
) -> tuple[list[dict[str, Any]], list[ControlRequest]]:
    """Run `cage-tai run` with an asking turn; answer its requests the way the bridge does."""
    document = turn(server, scenario, workdir, ask_permissions=True)
    proc = subprocess.Popen(
        CAGE_TAI, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env()
    )
    killer = threading.Timer(60, proc.kill)
    killer.start()
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(document.model_dump_json().encode() + b"\n")
    proc.stdin.flush()
    translator = _translator()
    seen: list[ControlRequest] = []
    lines: list[str] = []
    for raw in proc.stdout:
        line = raw.decode()
        translator.feed(line.rstrip("\n"))
        for request in translator.take_requests():
            seen.append(request)
            reply = answer(request)
            if reply is None:
                proc.stdin.close()
            else:
                proc.stdin.write(reply)
                proc.stdin.flush()
        if '"cage_control"' not in line:
            lines.append(line)
        if '"stream_end"' in line and '"thread_id"' not in line and not proc.stdin.closed:
            proc.stdin.close()
    proc.wait()
    killer.cancel()
    assert proc.stderr is not None
    stderr = proc.stderr.read().decode()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        pipe.close()
    assert proc.returncode in (0, 1), stderr
    return events_of("".join(lines)), seen


def _decide(allow: bool, message: str = "") -> Answerer:
    def answer(request: ControlRequest) -> bytes | None:
        assert isinstance(request, PermissionAsk)
        return request.reply(Decision(allow=allow, by="user", message=message))

    return answer


def test_a_denied_bash_call_never_runs_and_the_model_gets_the_refusal(
    server: FakeModelServer, tmp_path: Path
) -> None:
    server.requests.clear()
    events, seen = drive(server, "make", tmp_path, _decide(False, "Cage refused: no writes today"))
    assert [r.request.tool for r in seen if isinstance(r, PermissionAsk)] == ["bash"]
    assert not (tmp_path / "made.txt").exists()
    results = [t for record in server.requests.all() for t in record.tool_results()]
    assert any("Cage refused: no writes today" in t for t in results), results
    assert events[-1]["props"]["status"] == "completed"


def test_an_approved_bash_call_runs(server: FakeModelServer, tmp_path: Path) -> None:
    events, seen = drive(server, "make", tmp_path, _decide(True))
    assert len(seen) == 1
    assert (tmp_path / "made.txt").read_text() == "made\n"
    assert events[-1]["props"]["status"] == "completed"


def test_a_question_round_trips_into_the_tool_result(server: FakeModelServer, tmp_path: Path) -> None:
    server.requests.clear()

    def answer(request: ControlRequest) -> bytes | None:
        assert isinstance(request, QuestionAsk)
        assert request.question.text == "Which colour?" and request.question.options == ("red", "blue")
        return request.reply("blue, definitely")

    _, seen = drive(server, "ask", tmp_path, answer)
    assert len(seen) == 1
    results = [t for record in server.requests.all() for t in record.tool_results()]
    assert "blue, definitely" in results


def test_a_host_that_hangs_up_refuses_the_call(server: FakeModelServer, tmp_path: Path) -> None:
    events, seen = drive(server, "make", tmp_path, lambda request: None)
    assert len(seen) == 1 and not (tmp_path / "made.txt").exists()
    outputs = [e["props"].get("output", "") for e in events if e["type"] == "execute"]
    assert any(NO_HOST in (o or "") for o in outputs), outputs
