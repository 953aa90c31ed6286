"""Context compaction: token estimate, what is summarised, and the loop compacting on a budget."""

from __future__ import annotations

from pathlib import Path

from orchestrator.llm import (
    AgentLoop,
    ChatMessage,
    CompactionPolicy,
    Compactor,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    estimate_tokens,
)
from orchestrator.llm.compaction import split
from orchestrator.llm.tools import LocalSandbox, coding_tools
from orchestrator.stream import LoadingEvent
from tests.fakes.model_server import FakeModelServer
from tests.unit.llm.conftest import MakeClient
from tests.unit.llm.loop_helpers import drive


def _round(n: int) -> list[ChatMessage]:
    call = ToolCallBlock(id=f"c{n}", name="bash", arguments={"command": f"echo {n}"})
    return [
        ChatMessage(role="assistant", content=(call,)),
        ChatMessage(role="user", content=(ToolResultBlock(call_id=f"c{n}", output=f"out {n} " * 50),)),
    ]


def _history() -> list[ChatMessage]:
    return [
        ChatMessage.user("first question " * 100),
        ChatMessage.assistant("first answer " * 100),
        ChatMessage.user("second question " * 100),
        ChatMessage.assistant("second answer " * 100),
        ChatMessage.user("the latest question"),
    ]


def test_estimate_grows_with_the_history() -> None:
    small = estimate_tokens("", [ChatMessage.user("hi")])
    big = estimate_tokens("", _history())
    assert 0 < small < 20 < 500 < big


def test_split_keeps_the_latest_turn_or_the_latest_rounds() -> None:
    assert split(_history(), keep_rounds=2) == (0, 4)
    turn = [ChatMessage.user("do it"), *_round(1), *_round(2), *_round(3)]
    assert split(turn, keep_rounds=1) == (1, 5)
    assert split(turn, keep_rounds=3) is None
    assert split([ChatMessage.user("only")], keep_rounds=1) is None


async def test_compactor_summarises_rounds_inside_one_turn(
    server: FakeModelServer, make_client: MakeClient
) -> None:
    server.add_scenario("summary", [{"text": "They echoed 1 and 2."}])
    turn = [ChatMessage.user("do it"), *_round(1), *_round(2), *_round(3)]
    compactor = Compactor(make_client(scenario="summary"), CompactionPolicy(budget_tokens=100, keep_rounds=1))
    assert compactor.needed("", turn, [])
    done = await compactor.compact(turn)
    assert done is not None
    assert done.removed == 4 and done.summary == "They echoed 1 and 2."
    assert [m.role for m in done.messages] == ["user", "assistant", "user"]
    first = done.messages[0].content
    assert first[0] == TextBlock(text="do it") and "They echoed 1 and 2." in first[1].text  # type: ignore[union-attr]
    assert done.messages[1:] == tuple(turn[5:])
    request = server.requests.for_scenario("summary")[-1]
    assert "tools" not in request.body
    assert "out 1" in request.body["messages"][0]["content"][0]["text"]
    assert done.usage.input_tokens == request.usage.input_tokens  # type: ignore[union-attr]


async def test_the_loop_compacts_old_turns_past_the_budget(
    server: FakeModelServer, make_client: MakeClient, tmp_path: Path
) -> None:
    server.add_scenario("answer", [{"text": "Here is the answer."}])
    history = _history()
    budget = estimate_tokens("", history) // 2
    loop = AgentLoop(
        make_client(scenario="answer"),
        coding_tools(LocalSandbox(tmp_path)),
        compaction=CompactionPolicy(budget_tokens=budget),
    )
    result, rec = await drive(loop, history)
    assert result.stop_reason == "completed"
    assert result.steps[0].compacted is True
    requests = server.requests.for_scenario("answer")
    assert len(requests) == 2  # the summary, then the real step
    assert "tools" not in requests[0].body and "tools" in requests[1].body
    sent = requests[1].body["messages"]
    assert len(sent) == 1 and "<summary of the earlier conversation>" in sent[0]["content"][0]["text"]
    assert sent[0]["content"][1]["text"] == "the latest question"
    assert len(result.messages) == 2 and result.text == "Here is the answer."
    assert result.usage.input_tokens == sum(r.usage.input_tokens for r in requests)  # type: ignore[union-attr]
    assert any(isinstance(e, LoadingEvent) for e in rec.events)


async def test_no_compaction_under_the_budget(
    server: FakeModelServer, make_client: MakeClient, tmp_path: Path
) -> None:
    server.add_scenario("answer2", [{"text": "ok"}])
    loop = AgentLoop(
        make_client(scenario="answer2"),
        coding_tools(LocalSandbox(tmp_path)),
        compaction=CompactionPolicy(budget_tokens=1_000_000),
    )
    result, _ = await drive(loop, _history())
    assert result.steps[0].compacted is False
    assert len(server.requests.for_scenario("answer2")) == 1
    assert len(result.messages) == 6
