"""The native loop's skill face end to end: the manifest is in the system prompt the fake model
server receives, and the `skill` tool returns the skill's body (yaocode on the host, tai in the box)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.integration.native.conftest import NativeApp
from tests.integration.runners.conftest import REPO, cage_run

pytestmark = pytest.mark.slow
EXAMPLE_SKILLS = REPO / "assistants" / "examples" / "claude" / "skills"
MANIFEST_LINE = "- review: Review a diff for bugs, missing tests and risky changes."
BODY = "Read the diff, list concrete problems with file and line"


@pytest.mark.parametrize("runner", ["yaocode", "tai"])
def test_the_manifest_is_in_the_system_prompt_and_the_tool_returns_the_body(
    runner: str, app: NativeApp, workspace: Path
) -> None:
    app.server.add_scenario(
        "use-skill", [{"tool": "skill", "args": {"name": "review"}}, {"text": "reviewed"}]
    )
    assistant = app.assistant(runner, scenario="use-skill")
    shutil.copytree(EXAMPLE_SKILLS, app.root / "assistants" / "native" / runner / "skills")
    before = len(app.server.requests.all())
    result = cage_run(app, assistant, workspace, "review my change", timeout=600)
    assert result.code == 0, result.stderr[-3000:]
    bodies = [r.body for r in app.server.requests.all()[before:] if r.api == "anthropic"]
    assert len(bodies) == 2
    assert MANIFEST_LINE in json.dumps(bodies[0]["system"])
    assert "skill" in [t["name"] for t in bodies[0]["tools"]]
    results = [
        part
        for message in bodies[1]["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if part.get("type") == "tool_result"
    ]
    assert results and BODY in json.dumps(results[-1])
    assert "reviewed" in "".join(e["props"]["content"] for e in result.of("text"))
