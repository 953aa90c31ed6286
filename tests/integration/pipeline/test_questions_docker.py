"""Questions when the policy does not ask (no `permissions`, i.e. `bypass`): Claude Code and
opencode run without Cage's control channel, so nobody could answer their question tool; it is
not offered, so the model decides by itself and the turn goes on (before this, an opencode
question waited for an answer until the stall timeout). The real CLI in its real image, the
fake model server's scripted question call, the pipeline (docs/permissions.md, "Questions")."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.fakes.assistants import write_assistant, write_connector
from tests.fakes.model_server import FakeModelServer
from tests.integration.pipeline.test_permissions_docker import QUESTION, props, run
from tests.integration.pipeline.test_permissions_docker_codex_opencode import MODEL
from tests.pipeline_rig import Rig

OPENCODE_QUESTION: dict[str, Any] = {"tool": "question", "args": QUESTION["claude"]["args"]}
STEPS = {"claude": QUESTION["claude"], "opencode": OPENCODE_QUESTION}
KIND = {"claude": "anthropic", "opencode": "openai"}


def bypass_assistant(rig: Rig, server: FakeModelServer, runner: str, scenario: str) -> str:
    name = f"q-{runner}-{uuid.uuid4().hex[:6]}"
    model = "claude-sonnet-4-5" if runner == "claude" else MODEL[runner]
    host = server.url if runner == "claude" else server.url + "/v1"
    write_connector(
        rig.root, name, kind=KIND[runner], model=f"{model}@{scenario}", host=host, key_env="FAKE_KEY"
    )
    assistant_id = f"q.{name.replace('-', '_')}"
    write_assistant(
        rig.root,
        assistant_id,
        package={"name": assistant_id, "connector": name},
        prompts="- role: system\n  content: You are a careful coding agent.\n",
        sandbox={
            "version": "2.0",
            "runner": {"name": runner},
            "lifecycle": "session",
            "computer": {"memory": "1GB"},
        },
    )
    return assistant_id


@pytest.fixture(scope="module", autouse=True)
def scenarios(model_server: FakeModelServer) -> None:
    for runner, step in STEPS.items():
        model_server.add_scenario(f"q-bypass-{runner}", [step, {"text": "decided myself"}])


@pytest.mark.parametrize("runner", ["claude", "opencode"])
async def test_without_an_asking_policy_the_question_tool_is_not_offered(
    e2e: Rig, model_server: FakeModelServer, runner: str
) -> None:
    scenario = f"q-bypass-{runner}"
    assistant_id = bypass_assistant(e2e, model_server, runner, scenario)

    async def nobody(rig: Rig, session_id: str, asked: Any) -> None:
        raise AssertionError(f"a question reached the client without the control channel: {asked}")

    events = await run(e2e, assistant_id, f"chat-{uuid.uuid4().hex[:8]}", nobody, nobody)
    assert props(events, "question") == [] and props(events, "permission/request") == []
    [end] = [p for p in props(events, "stream_end")]
    assert end.status == "completed", end
    requests = model_server.requests.for_scenario(scenario)
    offered = {
        str(tool.get("name") or tool.get("function", {}).get("name"))
        for tool in requests[0].body.get("tools", [])
    }
    assert offered and not offered & {"AskUserQuestion", "question"}, offered
    # The fake model plays only calls to offered tools: it dropped the question and answered `done`.
    assert "".join(str(getattr(e.props, "content", "")) for e in events if e.type == "text") == "done"
