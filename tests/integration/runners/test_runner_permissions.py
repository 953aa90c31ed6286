"""codex and opencode ask through Cage: the real CLI in its runner image, the real bridge and its
control channel, scripted fake-model tool calls, and a gate that answers like a user would.

Each turn runs `run_runner_turn` with `gate.asks` true, in a box of the runner's own image on the
engine (the model reached at the host gateway). The checks look inside the container (a refused
command never ran), at what the model got back (the refusal text, the question's answer), and at
the gate (what it was asked, how often a human was asked).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import SecretStr

from orchestrator.dsl import ConnectorSpec, ConnectorType, McpServerSpec
from orchestrator.permissions import Decision, Question, ToolRequest
from orchestrator.pipeline.modes.bridge import run_runner_turn
from orchestrator.sandbox.backend import CreateSpec, ExecHandle, ExecSpec, FileEntry, SandboxRef, VolumeMount
from orchestrator.sandbox.docker import DockerBackend
from orchestrator.sandbox.docker.builder import DockerImageBuilder
from orchestrator.sandbox.limits import MAIN_COMMAND
from orchestrator.settings import Settings
from orchestrator.stream import CountingIds, Event, TurnBuilder, dump_event, validate_stream
from runners.base import TurnOutcome, TurnRequest
from runners.registry import adapter_for
from tests.fakes.model_server import FakeModelServer

pytestmark = pytest.mark.slow
ECHO_MCP = Path(__file__).resolve().parents[2] / "golden" / "codex" / "mcp_echo.py"
"""A stdlib MCP stdio server with one tool, `echo` (runs with the runner image's python3)."""
_CA = Path("/etc/ssl/certs/ca-certificates.crt")
HOST_CA = _CA if _CA.is_file() else None
MODEL = {"codex": "gpt-5.5", "opencode": "fake-model"}
REFUSAL = "refused by the test policy: no writes today"


@dataclass
class ScriptedGate:
    """A `PermissionGate` answering as a user would: `decide` per request, or wait `delay`
    seconds and refuse by timeout; "allow always" is remembered per tool, like the broker's rule."""

    decide: Callable[[ToolRequest], str]
    """`allow`, `deny`, `always` or `timeout`."""
    answer: str = ""
    delay: float = 0.0
    asked: list[ToolRequest] = field(default_factory=list)
    """Requests a human was asked about (not those a remembered rule decided)."""
    seen: list[ToolRequest] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    always: set[str] = field(default_factory=set)

    @property
    def asks(self) -> bool:
        return True

    async def check(self, request: ToolRequest) -> Decision:
        self.seen.append(request)
        if request.tool in self.always:
            return Decision(allow=True, by="policy", rule=f"{request.tool}: *")
        self.asked.append(request)
        choice = self.decide(request)
        if choice == "timeout":
            await anyio.sleep(self.delay)
            return Decision(allow=False, by="timeout", message=REFUSAL)
        if choice == "always":
            self.always.add(request.tool)
        if choice == "deny":
            return Decision(allow=False, by="user", message=REFUSAL)
        return Decision(allow=True, by="user")

    async def ask(self, question: Question) -> str:
        self.questions.append(question)
        return self.answer


class BoxSandbox:
    """`TurnSandbox` over one container of the backend."""

    def __init__(self, backend: DockerBackend, ref: SandboxRef) -> None:
        self.backend, self.ref = backend, ref

    async def exec(self, spec: ExecSpec) -> ExecHandle:
        return await self.backend.exec(self.ref, spec)

    async def put_files(self, dest_dir: str, files: Sequence[FileEntry]) -> None:
        await self.backend.put_files(self.ref, dest_dir, files)

    async def exists(self, path: str) -> bool:
        async with await self.exec(ExecSpec(argv=("test", "-e", path), user="sandbox")) as handle:
            async for _ in handle:
                pass
            return await handle.wait() == 0


@pytest.fixture(scope="module")
def model(model_server: FakeModelServer) -> FakeModelServer:
    model_server.add_scenario("gate-write", [{"shell": "echo gated > gated.txt"}, {"text": "finished"}])
    # the model answers slowly after the refused call: the cancel lands while the CLI still runs
    model_server.add_scenario(
        "gate-write-slow", [{"shell": "echo gated > gated.txt"}, {"text": "finished " * 40, "delay": 0.5}]
    )
    model_server.add_scenario(
        "gate-twice",
        [{"shell": "echo one > one.txt"}, {"shell": "echo two > two.txt"}, {"text": "finished"}],
    )
    model_server.add_scenario(
        "gate-question",
        [
            {
                "tool": "question",
                "args": {
                    "questions": [
                        {
                            "question": "Which colour?",
                            "header": "Colour",
                            "options": [
                                {"label": "blue", "description": "the sky"},
                                {"label": "red", "description": "a rose"},
                            ],
                        }
                    ]
                },
            },
            {"text": "finished"},
        ],
    )
    model_server.add_scenario(
        "gate-patch-codex",
        [
            {
                "tool": "apply_patch",
                "input": "*** Begin Patch\n*** Add File: made.txt\n+made\n*** End Patch\n",
            },
            {"text": "finished"},
        ],
    )
    model_server.add_scenario(
        "gate-patch-opencode",
        [
            {"tool": "write", "args": {"filePath": "/workspace/made.txt", "content": "made\n"}},
            {"text": "finished"},
        ],
    )
    for runner, tool in (("codex", "mcp__echo__echo"), ("opencode", "echo_echo")):
        model_server.add_scenario(
            f"gate-mcp-{runner}", [{"tool": tool, "args": {"text": "secret plan"}}, {"text": "finished"}]
        )
    return model_server


@pytest.fixture(params=["codex", "opencode"])
async def box(
    request: pytest.FixtureRequest, tmp_path: Path, test_run_labels: dict[str, str], docker_engine: Any
) -> AsyncIterator[tuple[str, BoxSandbox]]:
    runner: str = request.param
    settings = Settings(data_dir=tmp_path / "data", extra_ca_certs=HOST_CA)
    image = await DockerImageBuilder(settings).ensure(runner)
    backend = DockerBackend(settings)
    name = f"cage-it-gate-{runner}-{uuid.uuid4().hex[:8]}"
    await backend.ensure_volume(f"{name}-ws", test_run_labels)
    ref = await backend.create(
        CreateSpec(
            image=image.tag,
            name=name,
            command=MAIN_COMMAND,
            labels=test_run_labels,
            user="sandbox",
            workdir="/workspace",
            mounts=(VolumeMount(source=f"{name}-ws", target="/workspace", owner=(1000, 1000)),),
            cap_drop=("ALL",),
            security_opt=("no-new-privileges:true",),
            network="bridge",
            extra_hosts={"host.docker.internal": "host-gateway"},
        )
    )
    await backend.start(ref)
    yield runner, BoxSandbox(backend, ref)
    await backend.remove(ref, force=True)
    await backend.remove_volume(f"{name}-ws")


@dataclass
class Turn:
    result: TurnOutcome
    events: list[dict[str, Any]]


async def run_turn(
    runner: str,
    sandbox: BoxSandbox,
    server: FakeModelServer,
    scenario: str,
    gate: ScriptedGate,
    *,
    cancel: anyio.Event | None = None,
    mcp: tuple[McpServerSpec, ...] = (),
    model: str | None = None,
) -> Turn:
    connector = ConnectorSpec(
        id="fake",
        label="fake",
        type=ConnectorType.OPENAI,
        model=f"{model or MODEL[runner]}@{scenario}",
        base_url=server.url_for_containers + "/v1",
        key=SecretStr("sk-fake-gate-key-123456"),
        max_retries=1,
    )
    turn = TurnRequest(
        assistant_id=f"e2e.{runner}",
        owner="alice",
        session_id=f"chat-{uuid.uuid4().hex[:8]}",
        turn_id=f"turn-{uuid.uuid4().hex[:8]}",
        prompt="please do the task",
        connector=connector,
        mcp_servers=mcp,
        lifecycle="session",
    )
    builder = TurnBuilder(CountingIds(), runner=runner)
    events: list[Event] = [*builder.stream_start(turn.assistant_id)]

    async def emit(batch: Sequence[Event]) -> None:
        events.extend(batch)

    with anyio.fail_after(240):
        result = await run_runner_turn(
            adapter_for(runner), turn, sandbox, builder, emit, gate=gate, cancel=cancel
        )
    events += builder.stream_end(result.status, error=result.error)
    dumped = [dump_event(e) for e in events]
    assert validate_stream(dumped, stamped=False) == []
    return Turn(result, dumped)


def last_tool_results(server: FakeModelServer, scenario: str) -> list[str]:
    return server.requests.for_scenario(scenario)[-1].tool_results()


async def test_a_refused_shell_call_never_runs_and_the_agent_gets_the_refusal(
    box: tuple[str, BoxSandbox], model: FakeModelServer
) -> None:
    runner, sandbox = box
    gate = ScriptedGate(lambda _request: "deny")
    turn = await run_turn(runner, sandbox, model, "gate-write", gate)
    assert turn.result.status == "completed", turn.result
    [asked] = gate.asked
    assert (asked.tool, asked.subject, asked.runner) == ("bash", "echo gated > gated.txt", runner)
    assert not await sandbox.exists("/workspace/gated.txt")
    assert any(REFUSAL in result for result in last_tool_results(model, "gate-write"))


async def test_an_approved_shell_call_runs(box: tuple[str, BoxSandbox], model: FakeModelServer) -> None:
    runner, sandbox = box
    gate = ScriptedGate(lambda _request: "allow")
    turn = await run_turn(runner, sandbox, model, "gate-write", gate)
    assert turn.result.status == "completed", turn.result
    assert [r.tool for r in gate.asked] == ["bash"]
    assert await sandbox.exists("/workspace/gated.txt")


async def test_an_unanswered_call_gets_the_timeout_decision(
    box: tuple[str, BoxSandbox], model: FakeModelServer
) -> None:
    runner, sandbox = box
    gate = ScriptedGate(lambda _request: "timeout", delay=3.0)
    turn = await run_turn(runner, sandbox, model, "gate-write", gate)
    assert turn.result.status == "completed", turn.result
    assert len(gate.asked) == 1
    assert not await sandbox.exists("/workspace/gated.txt")
    assert any(REFUSAL in result for result in last_tool_results(model, "gate-write"))


async def test_allow_always_stops_asking(box: tuple[str, BoxSandbox], model: FakeModelServer) -> None:
    runner, sandbox = box
    gate = ScriptedGate(lambda _request: "always")
    turn = await run_turn(runner, sandbox, model, "gate-twice", gate)
    assert turn.result.status == "completed", turn.result
    assert [r.subject for r in gate.seen] == ["echo one > one.txt", "echo two > two.txt"]
    assert len(gate.asked) == 1  # the second call was decided by the remembered rule
    assert await sandbox.exists("/workspace/one.txt") and await sandbox.exists("/workspace/two.txt")


@pytest.mark.parametrize("box", ["opencode"], indirect=True)  # codex exec has no question tool
async def test_a_question_round_trips(box: tuple[str, BoxSandbox], model: FakeModelServer) -> None:
    runner, sandbox = box
    gate = ScriptedGate(lambda _request: "deny", answer="blue")
    turn = await run_turn(runner, sandbox, model, "gate-question", gate)
    assert turn.result.status == "completed", turn.result
    [question] = gate.questions
    assert (question.text, question.options) == ("Which colour?", ("blue", "red"))
    assert gate.asked == []  # the question tool itself is not a permission
    assert any('"blue"' in result for result in last_tool_results(model, "gate-question"))


async def test_a_cancel_while_a_call_waits_refuses_it_and_stops_the_cli(
    box: tuple[str, BoxSandbox], model: FakeModelServer
) -> None:
    runner, sandbox = box
    cancel = anyio.Event()
    waiting = anyio.Event()

    class Waiting(ScriptedGate):
        async def check(self, request: ToolRequest) -> Decision:
            self.asked.append(request)
            waiting.set()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

    async def cancel_once_asked() -> None:
        await waiting.wait()
        cancel.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_once_asked)
        turn = await run_turn(
            runner, sandbox, model, "gate-write-slow", Waiting(lambda _r: "allow"), cancel=cancel
        )
    assert turn.result.status == "cancelled", turn.result
    assert turn.result.stop_reason == "cancelled"
    assert not await sandbox.exists("/workspace/gated.txt")


async def test_a_refused_mcp_call_never_reaches_the_server(
    box: tuple[str, BoxSandbox], model: FakeModelServer
) -> None:
    runner, sandbox = box
    script = FileEntry(path="mcp/echo.py", content=ECHO_MCP.read_bytes(), mode=0o644, uid=1000, gid=1000)
    await sandbox.put_files("/workspace", [script])
    echo = McpServerSpec(id="echo", transport="stdio", command="python3", args=("/workspace/mcp/echo.py",))
    gate = ScriptedGate(lambda request: "deny" if request.tool.startswith("mcp:") else "allow")
    scenario = f"gate-mcp-{runner}"
    # an unbundled codex slug lists MCP tools directly (a bundled one defers them to tool_search)
    turn = await run_turn(runner, sandbox, model, scenario, gate, mcp=(echo,), model="fake-model")
    assert turn.result.status == "completed", turn.result
    [asked] = gate.asked
    assert (asked.tool, asked.subject) == ("mcp:echo/echo", "")
    if runner == "codex":  # opencode asks before it reports the call's input
        assert dict(asked.input) == {"text": "secret plan"}
    results = last_tool_results(model, scenario)
    assert any(REFUSAL in result for result in results)
    assert not any("secret plan" in result for result in results)  # the server never echoed it


async def test_a_refused_file_write_leaves_no_file(
    box: tuple[str, BoxSandbox], model: FakeModelServer
) -> None:
    runner, sandbox = box
    gate = ScriptedGate(lambda request: "deny" if request.tool in ("write", "edit") else "allow")
    scenario = f"gate-patch-{runner}"
    turn = await run_turn(runner, sandbox, model, scenario, gate)
    assert turn.result.status == "completed", turn.result
    [asked] = gate.asked
    assert (asked.tool, asked.subject) == ("write", "/workspace/made.txt")
    assert not await sandbox.exists("/workspace/made.txt")
    assert any(REFUSAL in result for result in last_tool_results(model, scenario))
