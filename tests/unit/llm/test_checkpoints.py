"""Checkpoints after every step, on disk and in memory, and resuming a turn from one."""

from __future__ import annotations

from pathlib import Path

from orchestrator.llm import AgentLoop, JsonFileCheckpoints, MemoryCheckpoints
from orchestrator.llm.tools import LocalSandbox, coding_tools
from orchestrator.stream import ExecuteEvent
from tests.fakes.model_server import FakeModelServer
from tests.unit.llm.conftest import MakeClient
from tests.unit.llm.loop_helpers import drive
from tests.unit.llm.test_engine import FIX_SCENARIO


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return ws


async def test_a_checkpoint_after_each_step(
    server: FakeModelServer, make_client: MakeClient, tmp_path: Path
) -> None:
    server.add_scenario("fix", FIX_SCENARIO)
    sink = MemoryCheckpoints()
    loop = AgentLoop(make_client(scenario="fix"), coding_tools(LocalSandbox(_ws(tmp_path))), checkpoints=sink)
    result, _ = await drive(loop, turn_id="turn-cp")
    assert [(c.round, c.phase) for c in sink.saved] == [
        (1, "model"),
        (1, "tools"),
        (2, "model"),
        (2, "tools"),
        (3, "model"),
        (3, "tools"),
        (4, "model"),
        (4, "done"),
    ]
    assert [len(c.messages) for c in sink.saved] == [2, 3, 4, 5, 6, 7, 8, 8]
    assert sink.saved[-1].stop_reason == "completed"
    assert sink.saved[-1].usage == result.usage
    assert all(c.turn_id == "turn-cp" and c.session_id == "sess-1" for c in sink.saved)


async def test_resume_a_stopped_turn_from_its_json_checkpoint(
    server: FakeModelServer, make_client: MakeClient, tmp_path: Path
) -> None:
    server.add_scenario("fix", FIX_SCENARIO)
    ws = _ws(tmp_path)
    store = JsonFileCheckpoints(tmp_path / "checkpoints")
    client = make_client(scenario="fix")
    first, _ = await drive(
        AgentLoop(client, coding_tools(LocalSandbox(ws)), max_rounds=1, checkpoints=store), turn_id="t9"
    )
    assert first.stop_reason == "max_rounds"
    assert (ws / "calc.py").read_text().endswith("a - b\n")  # only the read ran
    saved = await store.load("t9")
    assert saved is not None and saved.round == 1 and saved.phase == "done"

    resumed, _ = await drive(
        AgentLoop(client, coding_tools(LocalSandbox(ws)), checkpoints=store), resume=saved
    )
    assert resumed.stop_reason == "completed"
    assert resumed.rounds == 4
    assert (ws / "calc.py").read_text().endswith("a + b\n")
    assert resumed.usage.input_tokens > first.usage.input_tokens
    assert resumed.messages[:3] == first.messages
    assert (await store.load("t9")).stop_reason == "completed"  # type: ignore[union-attr]


async def test_resume_after_a_crash_between_model_and_tools_runs_the_pending_calls(
    server: FakeModelServer, make_client: MakeClient, tmp_path: Path
) -> None:
    server.add_scenario("fix", FIX_SCENARIO)
    ws = _ws(tmp_path)
    sink = MemoryCheckpoints()
    await drive(AgentLoop(make_client(scenario="fix"), coding_tools(LocalSandbox(ws)), checkpoints=sink))
    crashed = next(c for c in sink.saved if c.round == 2 and c.phase == "model")  # the edit was asked for
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")  # as it was when the turn crashed
    result, rec = await drive(
        AgentLoop(make_client(scenario="fix"), coding_tools(LocalSandbox(ws))), resume=crashed
    )
    assert result.stop_reason == "completed"
    assert (ws / "calc.py").read_text().endswith("a + b\n")
    assert result.rounds == 4
    first_tool = next(e for e in rec.events if isinstance(e, ExecuteEvent))
    assert first_tool.props.tool == "edit"  # the pending call ran before any new model step
