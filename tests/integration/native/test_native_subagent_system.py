"""`runner.options.agent_system` through `cage run` in a real container: the sub-agents' model
requests carry the configured system prompt, the parent's keep the assistant's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.model_server import FakeModelServer
from tests.integration.native.conftest import NativeApp
from tests.integration.runners.conftest import cage_run

pytestmark = pytest.mark.slow
SUB_SYSTEM = "SUBSYS-8830: survey the checkout and answer in one line."


@pytest.mark.parametrize("runner", ["yaocode", "tai"])
def test_the_sub_agents_get_the_configured_system_prompt(
    app: NativeApp, native_server: FakeModelServer, workspace: Path, runner: str
) -> None:
    scenario = f"delegate-{runner}"
    native_server.add_scenario(scenario, [{"tool": "agent", "args": {"prompt": "survey"}}, {"text": "done"}])
    aid = app.assistant(runner, scenario=scenario, options={"agent_system": SUB_SYSTEM})
    result = cage_run(app, aid, workspace, "delegate a survey", timeout=900)
    assert result.code == 0, result.stderr[-3000:]
    assert result.end["status"] == "completed"
    systems = [json.dumps(r.body.get("system")) for r in native_server.requests.for_scenario(scenario)]
    # the parent, its sub-agent, the parent again: only the sub-agent's carries the configured prompt
    assert [SUB_SYSTEM in s for s in systems] == [False, True, False]
