"""yaocode and tai through `cage run` in a real container: the package's stdio MCP server runs IN
THE SANDBOX (its `whereami` tool reports the container), only its allowlisted tools are
offered, `mcp.options.max_turn` bounds the rounds, the package `options` reach the model, and a
session's next turn resumes a compacted history."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest

from orchestrator.llm.compaction import SUMMARY_SYSTEM
from tests.fakes.mcp_servers import bare
from tests.fakes.model_server import FakeModelServer
from tests.integration.native.conftest import NativeApp
from tests.integration.runners.conftest import cage_run, own

pytestmark = pytest.mark.slow
RUNNERS = ["yaocode", "tai"]
FIRST_RUN_TIMEOUT = 900
MCP_STEPS = [
    {"tool": "bare__whereami", "args": {}},
    {"tool": "bare__echo", "args": {"text": "from the box"}},
    {"text": "checked"},
]


def with_mcp(app: NativeApp, runner: str, scenario: str, **package: object) -> str:
    """The native assistant for `runner`, its package listing the `bare` server's two tools."""
    aid = app.assistant(runner, scenario=scenario)
    (app.root / "mcps").mkdir(exist_ok=True)
    server = {"transport": "stdio", "command": "python3", "arguments": ["bare.py", "mcp-state"]}
    (app.root / "mcps" / "bare.mcp.yao").write_text(json.dumps(server))
    pkg = app.root / "assistants" / "native" / runner / "package.yao"
    doc = json.loads(pkg.read_text())
    doc.update({"mcp": {"servers": [{"bare": ["whereami", "echo"]}]}, **package})
    pkg.write_text(json.dumps(doc))
    return aid


def checkout(tmp_path: Path, runner: str) -> Path:
    ws = tmp_path / f"ws-{runner}"
    ws.mkdir()
    shutil.copy(bare.__file__, ws / "bare.py")
    return own(ws)


@pytest.mark.parametrize("runner", RUNNERS)
def test_the_stdio_server_runs_in_the_sandbox_and_only_listed_tools_are_offered(
    runner: str, app: NativeApp, native_server: FakeModelServer, tmp_path: Path
) -> None:
    scenario = f"mcp-{runner}"
    native_server.add_scenario(scenario, MCP_STEPS)
    aid = with_mcp(app, runner, scenario, options={"temperature": 0.4, "top_p": 0.7, "stop": ["HALT"]})
    ws = checkout(tmp_path, runner)
    result = cage_run(app, aid, ws, "where do you run?", timeout=FIRST_RUN_TIMEOUT)
    assert result.code == 0, result.stderr[-3000:]
    assert result.end["status"] == "completed"
    done = [e["props"] for e in result.of("execute") if e["props"].get("status") == "completed"]
    assert [p["tool"] for p in done] == ["bare__whereami", "bare__echo"]
    where = json.loads(done[0]["output"])
    assert where["dockerenv"] is True and where["hostname"] != socket.gethostname()
    assert done[1]["output"] == "from the box"
    calls = (ws / "mcp-state" / "calls.log").read_text().splitlines()  # written inside the box
    assert [c.split()[0] for c in calls] == ["whereami", "echo"]
    first = native_server.requests.for_scenario(scenario)[0].body
    offered = {t["name"] for t in first["tools"]}
    assert {"bare__whereami", "bare__echo", "bash"} <= offered and "bare__secret" not in offered
    assert (first["temperature"], first["top_p"], first["stop_sequences"]) == (0.4, 0.7, ["HALT"])


@pytest.mark.parametrize("runner", RUNNERS)
def test_max_turn_bounds_the_rounds(
    runner: str, app: NativeApp, native_server: FakeModelServer, tmp_path: Path
) -> None:
    scenario = f"mcp-rounds-{runner}"
    native_server.add_scenario(
        scenario,
        [{"tool": "bare__echo", "args": {"text": str(n)}} for n in range(5)] + [{"text": "unreachable"}],
    )
    aid = with_mcp(app, runner, scenario)
    pkg = app.root / "assistants" / "native" / runner / "package.yao"
    doc = json.loads(pkg.read_text())
    doc["mcp"]["options"] = {"max_turn": 2}
    pkg.write_text(json.dumps(doc))
    result = cage_run(app, aid, checkout(tmp_path, runner), "echo", timeout=FIRST_RUN_TIMEOUT)
    assert result.end["status"] == "error"
    (summary,) = result.of("event", "result/summary")
    assert summary["props"]["stop_reason"] == "max_rounds" and summary["props"]["num_turns"] == 2
    assert len(native_server.requests.for_scenario(scenario)) == 2


@pytest.mark.parametrize("runner", RUNNERS)
def test_the_next_turn_of_a_long_session_is_compacted(
    runner: str, app: NativeApp, native_server: FakeModelServer, tmp_path: Path
) -> None:
    """Compaction is on by default; with a small budget the second turn does not reload the
    first turn's big tool output but a summary of it (the checkpoint the turn resumes from)."""
    scenario = f"compact-{runner}"
    native_server.add_scenario(scenario, [{"shell": "python3 -c \"print('y' * 8000)\""}, {"text": "printed"}])
    aid = app.assistant(runner, scenario=scenario)
    pkg = app.root / "assistants" / "native" / runner / "package.yao"
    doc = json.loads(pkg.read_text())
    doc["compaction"] = {"budget_tokens": 2500}
    pkg.write_text(json.dumps(doc))
    ws = checkout(tmp_path, runner)
    session = f"compact-{runner}-{tmp_path.name}"
    first = cage_run(app, aid, ws, "print a lot", session=session, timeout=FIRST_RUN_TIMEOUT)
    assert first.code == 0, first.stderr[-3000:]
    before = len(native_server.requests.for_scenario(scenario))
    second = cage_run(app, aid, ws, "print it again", session=session, timeout=FIRST_RUN_TIMEOUT)
    assert second.code == 0, second.stderr[-3000:]
    later = native_server.requests.for_scenario(scenario)[before:]
    summary = later[0].body
    assert summary["system"] == SUMMARY_SYSTEM and "tools" not in summary
    step = json.dumps(later[1].body["messages"])
    assert "<summary of the earlier conversation>" in step and "print it again" in step
    assert "y" * 8000 not in step and len(step) // 4 < 2500
