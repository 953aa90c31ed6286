"""The native loop's skill face: the manifest in the system prompt and the `skill` tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.llm.tools import ToolContext
from orchestrator.llm.tools.skills import (
    MAX_BODY_CHARS,
    MAX_DESCRIPTION_CHARS,
    SkillCard,
    SkillTool,
    cards_from_dir,
    skills_manifest,
    with_skills,
)

CTX = ToolContext(session_id="s", turn_id="t", tool_call_id="c")


def test_the_manifest_lists_name_and_description_and_caps_it() -> None:
    manifest = skills_manifest(
        [
            SkillCard(name="review", description="Review\n  a diff."),
            SkillCard(name="long", description="x" * 5000),
        ]
    )
    assert "- review: Review a diff." in manifest and "`skill` tool" in manifest
    long_line = next(line for line in manifest.splitlines() if line.startswith("- long:"))
    assert len(long_line) == len("- long: ") + MAX_DESCRIPTION_CHARS
    assert with_skills("You code.", []) == "You code."
    assert with_skills("You code.", [SkillCard(name="r")]).startswith("You code.\n\n# Skills")
    assert with_skills("", [SkillCard(name="r")]).startswith("# Skills")


@pytest.mark.anyio
async def test_the_tool_returns_the_body_and_where_the_files_are() -> None:
    tool = SkillTool(
        [
            SkillCard(name="review", body="Read the diff.", location="/w/skills/review"),
            SkillCard(name="big", body="y" * (MAX_BODY_CHARS + 10)),
        ]
    )
    result = await tool.run({"name": "review"}, CTX)
    assert not result.is_error
    assert result.output.startswith("Read the diff.") and "/w/skills/review" in result.output
    assert len((await tool.run({"name": "big"}, CTX)).output) == MAX_BODY_CHARS
    missing = await tool.run({"name": "nope"}, CTX)
    assert missing.is_error and "big, review" in missing.output
    assert (await tool.run({}, CTX)).is_error


def test_cards_from_the_box_directory(tmp_path: Path) -> None:
    (tmp_path / "review").mkdir()
    (tmp_path / "review" / "SKILL.md").write_text("---\ndescription: Review it.\n---\nSteps.\n")
    (card,) = cards_from_dir(tmp_path)
    assert (card.name, card.description, card.body, card.location) == (
        "review",
        "Review it.",
        "Steps.",
        f"{tmp_path}/review",
    )
    assert cards_from_dir(tmp_path / "absent") == ()
