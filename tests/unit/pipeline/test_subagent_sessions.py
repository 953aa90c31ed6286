"""Sub-agents in persisted child sessions: the `agent` tool with the pipeline's `StoreChildSessions`
on a real store (SQLite and Postgres) and the fake model. Each task gets a session row linked to the
parent, its events land in its own log, the parent's stream only gets a started/ended pair."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from orchestrator.llm import AgentLoop, AgentTool, ChatMessage, client_for
from orchestrator.llm.subagent import AgentArgs
from orchestrator.llm.tools import LocalSandbox, ToolContext, coding_tools
from orchestrator.pipeline.modes.child_sessions import StoreChildSessions
from orchestrator.store import Store
from orchestrator.stream import (
    CountingIds,
    Event,
    LifecycleEvent,
    StreamStart,
    SubagentEnded,
    SubagentStarted,
    TurnBuilder,
    validate_stream,
)
from tests.fakes.model_server import FakeModelServer
from tests.unit.llm.conftest import settings as client_settings

TASKS = [{"name": "docs", "prompt": "read the docs"}, "look at the tests"]


@pytest.fixture
async def server() -> AsyncIterator[FakeModelServer]:
    async with FakeModelServer("text", host="127.0.0.1") as running:
        running.add_scenario("parent", [{"tool": "agent", "args": {"prompts": TASKS}}, {"text": "all done"}])
        running.add_scenario("sub", [{"tool": "glob", "args": {"pattern": "*.txt"}}, {"text": "report"}])
        yield running


async def test_each_sub_agent_gets_a_child_session_of_its_own(
    store: Store, server: FakeModelServer, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    parent = await store.sessions.create("u1", "tests.coder", client_id="parent-session")
    sessions = StoreChildSessions(
        store, owner="u1", assistant_id="tests.coder", parent_session_id=parent.id, turn_id="turn-1"
    )
    sub_client = client_for(client_settings(server, scenario="sub"))
    parent_client = client_for(client_settings(server, scenario="parent"))
    box = coding_tools(LocalSandbox(tmp_path))
    box.add(AgentTool(sub_client, box, sessions=sessions))
    events: list[Event] = []

    async def emit(batch: Sequence[Event]) -> None:
        events.extend(batch)

    builder = TurnBuilder(CountingIds(), runner="yaocode")
    events.extend(builder.stream_start("tests.coder"))
    try:
        result = await AgentLoop(parent_client, box).run(
            [ChatMessage.user("go")], builder, None, emit=emit, session_id=parent.id, turn_id="turn-1"
        )
    finally:
        await sub_client.aclose()
        await parent_client.aclose()
    events.extend(builder.stream_end("completed"))
    assert result.stop_reason == "completed" and result.text == "all done"
    assert validate_stream(events, stamped=False) == []

    children = await store.sessions.list("u1", parent_id=parent.id)
    assert sorted(c.title for c in children) == ["docs", "task-2"]
    assert all(
        c.parent_id == parent.id and c.metadata["parent_session"] == "parent-session" for c in children
    )
    # the parent's stream: a started/ended pair per child, none of the children's own events
    started = [
        e.props for e in events if isinstance(e, LifecycleEvent) and isinstance(e.props, SubagentStarted)
    ]
    ended = [e.props for e in events if isinstance(e, LifecycleEvent) and isinstance(e.props, SubagentEnded)]
    assert {s.session_id for s in started} == {s.session_id for s in ended} == {c.id for c in children}
    assert {e.status for e in ended} == {"completed"}
    assert [e for e in events if getattr(e, "thread_id", None)] == []
    assert "report" not in [getattr(getattr(e, "props", None), "content", None) for e in events]
    # each child's log holds its own run: stream_start naming its session, the glob, the report
    for child in children:
        logged = await store.events.after(child.id)
        assert validate_stream(logged) == []
        assert {e.session_id for e in logged} == {child.id}
        [start] = [
            e.props for e in logged if isinstance(e, LifecycleEvent) and isinstance(e.props, StreamStart)
        ]
        assert start.chat_id == child.id and start.metadata is not None
        assert start.metadata["parent_session_id"] == parent.id
        texts = [e.props.content for e in logged if e.type == "event" and e.props.event == "message_end"]
        assert "report" in texts
    output = result.messages[2].tool_results[0].output
    assert "## docs: read the docs\nreport" in output and "## task-2: look at the tests\nreport" in output


async def test_exactly_one_of_prompt_and_prompts(server: FakeModelServer, tmp_path: Path) -> None:
    ctx = ToolContext(session_id="s", turn_id="t", tool_call_id="c")
    client = client_for(client_settings(server, scenario="sub"))
    tool = AgentTool(client, coding_tools(LocalSandbox(tmp_path)))
    both = await tool.run({"prompt": "a", "prompts": ["b"]}, ctx)
    await client.aclose()
    assert both.is_error and "exactly one of `prompt`" in both.output
    named = AgentArgs.model_validate({"prompts": [{"name": "n1", "prompt": "x"}, "y", {"prompt": "z"}]})
    assert [(t.name, t.prompt) for t in named.tasks] == [("n1", "x"), ("task-2", "y"), ("task-3", "z")]
