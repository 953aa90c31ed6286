"""The native loop asks its gate before each tool call: a refused call never runs and the model
gets the refusal; sub-agents ask the parent's gate; the `question` tool asks it too.

The fake model server plays the calls, the tools run for real on a temp dir; the gate is a
scripted `PermissionGate` (the broker itself is tested in tests/unit/pipeline)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.llm import AgentLoop, AgentTool
from orchestrator.llm.tools import LocalSandbox, coding_tools
from orchestrator.llm.tools.question import NO_ONE, QuestionTool
from orchestrator.permissions import Decision, Question, ToolRequest
from tests.fakes.model_server import FakeModelServer
from tests.unit.llm.conftest import MakeClient
from tests.unit.llm.loop_helpers import drive

REFUSAL = "refused by the test gate"


@dataclass
class Gate:
    deny: set[str] = field(default_factory=set)
    """Subjects refused."""
    answer: str = "blue"
    seen: list[ToolRequest] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    @property
    def asks(self) -> bool:
        return True

    async def check(self, request: ToolRequest) -> Decision:
        self.seen.append(request)
        if request.subject in self.deny:
            return Decision(allow=False, by="user", message=REFUSAL)
        return Decision(allow=True, by="user")

    async def ask(self, question: Question) -> str:
        self.questions.append(question)
        return self.answer


def _results(server: FakeModelServer, scenario: str) -> list[str]:
    return server.requests.for_scenario(scenario)[-1].tool_results()


async def test_a_refused_call_never_runs_and_the_model_gets_the_refusal(
    server: FakeModelServer, make_client: MakeClient, tmp_path: Path
) -> None:
    server.add_scenario(
        "gate-bash",
        [
            {"shell": "echo no > refused.txt"},
            {"tool": "write", "args": {"path": "sub/ok.txt", "content": "fine"}},
            {"text": "done"},
        ],
    )
    gate = Gate(deny={"echo no > refused.txt"})
    loop = AgentLoop(
        make_client("anthropic", scenario="gate-bash"), coding_tools(LocalSandbox(tmp_path)), gate=gate
    )
    result, _ = await drive(loop, "go")
    assert result.stop_reason == "completed"
    assert not (tmp_path / "refused.txt").exists()
    assert (tmp_path / "sub" / "ok.txt").read_text() == "fine"
    assert [(r.tool, r.subject, r.runner) for r in gate.seen] == [
        ("bash", "echo no > refused.txt", "yaocode"),
        ("write", "sub/ok.txt", "yaocode"),
    ]
    assert gate.seen[0].call_id and gate.seen[0].input["command"] == "echo no > refused.txt"
    assert any(REFUSAL in r for r in _results(server, "gate-bash"))
    [bash] = [t for s in result.steps for t in s.tools if t.name == "bash"]
    assert bash.is_error and bash.metadata == {"refused": True}


async def test_sub_agents_ask_the_parent_gate(
    server: FakeModelServer, make_client: MakeClient, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("secret\n")
    server.add_scenario(
        "gate-agent",
        [{"tool": "agent", "args": {"prompt": "read notes.txt"}}, {"text": "done"}],
    )
    server.add_scenario(
        "gate-agent-child", [{"tool": "read", "args": {"path": "notes.txt"}}, {"text": "read it"}]
    )
    gate = Gate(deny={"notes.txt"})
    tools = coding_tools(LocalSandbox(tmp_path))
    child_client = make_client("anthropic", scenario="gate-agent-child")
    tools.add(AgentTool(child_client, tools))
    loop = AgentLoop(make_client("anthropic", scenario="gate-agent"), tools, gate=gate)
    result, _ = await drive(loop, "go")
    assert result.stop_reason == "completed"
    assert [(r.tool, r.subject) for r in gate.seen] == [("task", "read notes.txt"), ("read", "notes.txt")]
    assert any(REFUSAL in r for r in _results(server, "gate-agent-child"))


async def test_the_question_tool_asks_the_gate(
    server: FakeModelServer, make_client: MakeClient, tmp_path: Path
) -> None:
    server.add_scenario(
        "gate-question",
        [
            {"tool": "question", "args": {"question": "Which colour?", "options": ["red", "blue"]}},
            {"text": "ok"},
        ],
    )
    gate = Gate()
    tools = coding_tools(LocalSandbox(tmp_path))
    tools.add(QuestionTool())
    loop = AgentLoop(make_client("anthropic", scenario="gate-question"), tools, gate=gate)
    result, _ = await drive(loop, "go")
    assert result.stop_reason == "completed"
    assert gate.seen == []  # asking the user is never itself gated
    [question] = gate.questions
    assert (question.text, question.options) == ("Which colour?", ("red", "blue"))
    assert question.call_id
    assert "blue" in _results(server, "gate-question")


async def test_without_a_gate_the_question_tool_says_no_one_is_there(
    server: FakeModelServer, make_client: MakeClient, tmp_path: Path
) -> None:
    server.add_scenario(
        "no-gate-question", [{"tool": "question", "args": {"question": "Why?"}}, {"text": "ok"}]
    )
    tools = coding_tools(LocalSandbox(tmp_path))
    tools.add(QuestionTool())
    loop = AgentLoop(make_client("anthropic", scenario="no-gate-question"), tools)
    await drive(loop, "go")
    assert NO_ONE in _results(server, "no-gate-question")
