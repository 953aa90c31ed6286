"""`runner.connectors.light` reaches Claude Code: its Explore sub-agent (which asks for the
`haiku` alias) calls the light model, as the fake model server records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.runners.conftest import App, cage_run

pytestmark = pytest.mark.slow
LIGHT_MODEL = "claude-haiku-4-5@text"
EXPLORE = {"description": "look around", "prompt": "List the files here.", "subagent_type": "Explore"}


def test_the_light_role_is_the_model_of_claudes_haiku_sub_agents(app: App, workspace: Path) -> None:
    app.server.add_scenario(
        "explore",
        [
            {"parts": [{"tool": "Agent", "args": EXPLORE}, {"tool": "Task", "args": EXPLORE}]},
            {"text": "explored"},
        ],
    )
    assistant = app.assistant("claude", scenario="explore")
    main = json.loads((app.root / "connectors" / "fake-claude-explore.conn.yao").read_text())
    light = {**main, "label": "light", "options": {**main["options"], "model": LIGHT_MODEL}}
    (app.root / "connectors" / "fake-claude-light.conn.yao").write_text(json.dumps(light))
    sandbox_file = app.root / "assistants" / "e2e" / "claude" / "sandbox.yao"
    sandbox = json.loads(sandbox_file.read_text())
    sandbox["runner"]["connectors"] = {"light": "fake-claude-light"}
    sandbox_file.write_text(json.dumps(sandbox))
    before = len(app.server.requests.all())
    result = cage_run(app, assistant, workspace, "explore the repo")
    assert result.code == 0, result.stderr[-2000:]
    models = [r.model for r in app.server.requests.all()[before:] if r.api == "anthropic"]
    assert "claude-sonnet-4-5@explore" in models
    assert LIGHT_MODEL in models, models
    assert "explored" in "".join(e["props"]["content"] for e in result.of("text"))
