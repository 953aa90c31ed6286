"""Skills reach the agent CLIs: the fake model server sees the skill in what each CLI sends.

The skill is the one the shipped `examples.claude` assistant carries (`skills/review/SKILL.md`),
copied into a test assistant that talks to the fake model server.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.integration.runners.conftest import REPO, App, cage_run

pytestmark = pytest.mark.slow
EXAMPLE_SKILLS = REPO / "assistants" / "examples" / "claude" / "skills"
DESCRIPTION = "Review a diff for bugs, missing tests and risky changes."


@pytest.mark.parametrize("runner", ["claude", "codex", "opencode"])
def test_the_example_review_skill_is_offered_to_the_model(runner: str, app: App, workspace: Path) -> None:
    assert DESCRIPTION in (EXAMPLE_SKILLS / "review" / "SKILL.md").read_text()
    assistant = app.assistant(runner, scenario="text")
    shutil.copytree(EXAMPLE_SKILLS, app.root / "assistants" / "e2e" / runner / "skills")
    before = len(app.server.requests.all())
    result = cage_run(app, assistant, workspace, "say hi")
    assert result.code == 0, result.stderr[-2000:]
    sent = [json.dumps(r.body) for r in app.server.requests.all()[before:] if r.api != "count_tokens"]
    assert any(DESCRIPTION in body for body in sent), sent[-1][:3000] if sent else "no model request"
