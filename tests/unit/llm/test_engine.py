"""The loop engine end to end: fake model server, real files, real subprocesses."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from orchestrator.llm import AgentLoop
from orchestrator.llm.tools import LocalSandbox, coding_tools
from orchestrator.stream import ExecuteEvent, LifecycleEvent, ToolCallEvent
from tests.fakes.model_server import FakeModelServer
from tests.unit.llm.conftest import PROVIDERS, MakeClient
from tests.unit.llm.loop_helpers import drive, max_overlap

TEST_CMD = "python3 -c 'import calc; assert calc.add(2, 3) == 5; print(\"tests ok\")'"

FIX_SCENARIO = [
    {"parts": [{"text": "Let me look."}, {"tool": "read", "args": {"path": "calc.py"}}]},
    {"tool": "edit", "args": {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}},
    {"shell": TEST_CMD},
    {"text": "Fixed the bug; the tests pass."},
]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return tmp_path


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_read_edit_test_and_answer(
    server: FakeModelServer, make_client: MakeClient, ws: Path, provider: str
) -> None:
    server.add_scenario("fix", FIX_SCENARIO)
    loop = AgentLoop(
        make_client(provider, scenario="fix"), coding_tools(LocalSandbox(ws)), emit_tool_calls=True
    )
    result, rec = await drive(loop, "fix calc.add")
    assert result.stop_reason == "completed"
    assert result.rounds == 4
    assert (ws / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert result.text == "Fixed the bug; the tests pass."
    tools = [t for s in result.steps for t in s.tools]
    assert [t.name for t in tools] == ["read", "edit", "bash"]
    assert not any(t.is_error for t in tools)
    finished = [e for e in rec.events if isinstance(e, ExecuteEvent) and e.props.status == "completed"]
    assert [e.props.runner for e in finished] == ["yaocode"] * 3
    assert "tests ok" in (finished[-1].props.output or "")
    assert "     2\t    return a - b" in (finished[0].props.output or "")
    assert any(isinstance(e, ToolCallEvent) and e.props.name == "edit" for e in rec.events)
    logged = [r.usage for r in server.requests.for_scenario("fix") if r.usage is not None]
    assert result.usage.input_tokens == sum(u.input_tokens for u in logged)
    assert result.usage.output_tokens == sum(u.output_tokens for u in logged)
    usage_events = [e for e in rec.events if isinstance(e, LifecycleEvent) and e.props.event == "token/usage"]
    assert len(usage_events) == 4


async def test_six_calls_run_at_most_four_at_once(
    server: FakeModelServer, make_client: MakeClient, ws: Path
) -> None:
    calls = [
        {"tool": "bash", "args": {"command": f"date +%s.%N > s{i}; sleep 0.4; date +%s.%N > e{i}"}}
        for i in range(6)
    ]
    server.add_scenario("six", [{"parts": calls}, {"text": "all done"}])
    loop = AgentLoop(make_client(scenario="six"), coding_tools(LocalSandbox(ws)))
    result, _ = await drive(loop)
    assert result.stop_reason == "completed"
    spans = [(float((ws / f"s{i}").read_text()), float((ws / f"e{i}").read_text())) for i in range(6)]
    assert max_overlap(spans) == 4
    steps = result.steps[0].tools
    assert len(steps) == 6


async def test_sequential_tools_never_overlap(
    server: FakeModelServer, make_client: MakeClient, ws: Path
) -> None:
    calls = [
        {"tool": "bash", "args": {"command": f"date +%s.%N > s{i}; sleep 0.1; date +%s.%N > e{i}"}}
        for i in range(3)
    ]
    server.add_scenario("three", [{"parts": calls}, {"text": "ok"}])
    loop = AgentLoop(make_client(scenario="three"), coding_tools(LocalSandbox(ws)), parallel_tools=False)
    result, _ = await drive(loop)
    spans = [(float((ws / f"s{i}").read_text()), float((ws / f"e{i}").read_text())) for i in range(3)]
    assert result.stop_reason == "completed" and max_overlap(spans) == 1


async def test_identical_call_in_consecutive_rounds_terminates(
    server: FakeModelServer, make_client: MakeClient, ws: Path
) -> None:
    server.add_scenario(
        "stuck", [{"shell": "echo again >> log.txt"}, {"shell": "echo again >> log.txt"}, {"text": "never"}]
    )
    loop = AgentLoop(make_client(scenario="stuck"), coding_tools(LocalSandbox(ws)))
    result, rec = await drive(loop)
    assert result.stop_reason == "tool_loop_terminated"
    assert result.rounds == 2
    assert (ws / "log.txt").read_text() == "again\n"  # the repeat never ran
    assert result.messages[-1].tool_results[0].is_error
    assert any(getattr(e.props, "code", None) == "tool_loop_terminated" for e in rec.events)


async def test_round_budget_stops_with_max_rounds(
    server: FakeModelServer, make_client: MakeClient, ws: Path
) -> None:
    server.add_scenario("long", [{"shell": f"echo {i} >> log.txt"} for i in range(6)] + [{"text": "done"}])
    loop = AgentLoop(make_client(scenario="long"), coding_tools(LocalSandbox(ws)), max_rounds=3)
    result, _ = await drive(loop)
    assert result.stop_reason == "max_rounds"
    assert result.rounds == 3
    assert (ws / "log.txt").read_text().split() == ["0", "1", "2"]


async def test_cancel_mid_tool_kills_the_subprocess(
    server: FakeModelServer, make_client: MakeClient, ws: Path
) -> None:
    server.add_scenario("slow", [{"shell": "echo $$ > pid.txt; sleep 60"}, {"text": "never"}])
    loop = AgentLoop(make_client(scenario="slow"), coding_tools(LocalSandbox(ws)))
    cancel = anyio.Event()
    pid_file = anyio.Path(ws / "pid.txt")

    async def cancel_when_running() -> None:
        for _ in range(200):  # the pid file is written by the subprocess: poll for it
            if await pid_file.exists() and (await pid_file.read_text()).strip():
                break
            await anyio.sleep(0.05)
        cancel.set()

    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_when_running)
            result, rec = await drive(loop, cancel=cancel)
    assert result.stop_reason == "cancelled"
    pid = int((ws / "pid.txt").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    finished = [e for e in rec.events if isinstance(e, ExecuteEvent) and e.props.status == "error"]
    assert finished and finished[0].props.output == "cancelled"
    assert result.messages[-1].tool_results[0].output.startswith("not run")


async def test_model_error_stops_with_error(
    server: FakeModelServer, make_client: MakeClient, ws: Path
) -> None:
    loop = AgentLoop(make_client(scenario="error401"), coding_tools(LocalSandbox(ws)))
    result, rec = await drive(loop)
    assert result.stop_reason == "error"
    assert result.error is not None and "401" in result.error
    assert any(getattr(e.props, "code", None) == "model_error" for e in rec.events)


async def test_a_failed_call_may_be_retried_as_is(
    server: FakeModelServer, make_client: MakeClient, ws: Path
) -> None:
    # the same failing command twice, then it succeeds once the file exists: a retry, not a loop
    flaky = "test -f ready || { touch ready; exit 3; }"
    server.add_scenario("retry", [{"shell": flaky}, {"shell": flaky}, {"text": "worked on the second try"}])
    loop = AgentLoop(make_client(scenario="retry"), coding_tools(LocalSandbox(ws)))
    result, _ = await drive(loop)
    assert result.stop_reason == "completed"
    assert [r.is_error for m in result.messages for r in m.tool_results] == [True, False]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_temperature_reaches_the_model(
    server: FakeModelServer, make_client: MakeClient, ws: Path, provider: str
) -> None:
    from orchestrator.llm import ModelOptions

    server.add_scenario("warm", [{"text": "hi"}])
    loop = AgentLoop(
        make_client(provider, scenario="warm"),
        coding_tools(LocalSandbox(ws)),
        options=ModelOptions(temperature=0.25),
    )
    result, _ = await drive(loop)
    assert result.stop_reason == "completed"
    assert server.requests.for_scenario("warm")[-1].body["temperature"] == 0.25
