"""The `agent` tool: concurrent read-only sub-agents with their own child sessions."""

from __future__ import annotations

from pathlib import Path

from orchestrator.llm import AgentLoop, AgentTool
from orchestrator.llm.tools import LocalSandbox, ToolContext, coding_tools
from orchestrator.stream import LifecycleEvent
from tests.fakes.model_server import FakeModelServer
from tests.unit.llm.conftest import MakeClient
from tests.unit.llm.loop_helpers import drive, max_overlap

PROMPTS = [f"look at area {i}" for i in range(10)]


async def test_ten_prompts_run_with_at_most_eight_in_flight(
    server: FakeModelServer, make_client: MakeClient, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    server.add_scenario(
        "parent", [{"tool": "agent", "args": {"prompts": PROMPTS}}, {"text": "summary of reports"}]
    )
    server.add_scenario(
        "sub",
        [
            {"tool": "glob", "args": {"pattern": "*.txt"}},
            {"tool": "write", "args": {"path": "evil.txt", "content": "no"}, "force": True},
            {"text": "report", "delay": 0.05},
        ],
    )
    box = coding_tools(LocalSandbox(tmp_path))
    agent = AgentTool(make_client(scenario="sub"), box)
    box.add(agent)
    loop = AgentLoop(make_client(scenario="parent"), box)
    result, rec = await drive(loop)

    assert result.stop_reason == "completed"
    assert 2 <= agent.peak_in_flight <= 8
    # child threads as seen in the stream: opened and closed, never more than 8 at once
    opened: dict[str, float] = {}
    spans: list[tuple[float, float]] = []
    for event, at in zip(rec.events, rec.times, strict=True):
        if isinstance(event, LifecycleEvent) and event.thread_id:
            if event.props.event == "stream_start":
                opened[event.thread_id] = at
            elif event.props.event == "stream_end":
                spans.append((opened[event.thread_id], at))
    assert len(spans) == 10
    assert max_overlap(spans) <= 8
    tool = result.steps[0].tools[0]
    children = tool.metadata["children"]
    assert isinstance(children, list) and len(children) == 10
    ids = [c["session_id"] for c in children]  # type: ignore[index, call-overload]
    assert len(set(ids)) == 10 and set(ids) == set(opened)
    assert all(str(i).startswith("sess-1/agent-") for i in ids)
    output = result.messages[2].tool_results[0].output
    assert output.count("## task-") == 10 and "## task-10: look at area 9" in output
    # sub-agents only had read-only tools: the forced write was refused, nothing written
    assert not (tmp_path / "evil.txt").exists()
    sub_requests = [r for r in server.requests.for_scenario("sub") if r.step == 0]
    offered = {t["name"] for t in sub_requests[0].body["tools"]}
    assert offered == {"read", "glob", "grep", "ls"}


async def test_single_prompt_and_concurrency_cap(
    server: FakeModelServer, make_client: MakeClient, tmp_path: Path
) -> None:
    server.add_scenario(
        "parent1", [{"tool": "agent", "args": {"prompts": PROMPTS[:4], "max_concurrency": 1}}, {"text": "ok"}]
    )
    server.add_scenario("sub1", [{"text": "report", "delay": 0.02}])
    box = coding_tools(LocalSandbox(tmp_path))
    agent = AgentTool(make_client(scenario="sub1"), box)
    box.add(agent)
    result, _ = await drive(AgentLoop(make_client(scenario="parent1"), box))
    assert result.stop_reason == "completed"
    assert agent.peak_in_flight == 1
    bad = await agent.run({}, ToolContext(session_id="s", turn_id="t", tool_call_id="c"))
    assert bad.is_error and "prompt" in bad.output
