"""Where each runner's skills go in the box, and the files written there (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.dsl import ConnectorSpec, ConnectorType, Skill, SkillFile
from orchestrator.errors import RunnerError
from runners.base import TurnRequest
from runners.skills import skill_root, skill_writes
from runners.tai.adapter import tai_turn

HOME = "/workspace/.cage-state/home"
STATE = "/workspace/.cage-state/runner"


@pytest.mark.parametrize(
    ("runner", "root"),
    [
        ("claude", f"{HOME}/.claude/skills"),
        ("opencode", f"{HOME}/.config/opencode/skills"),
        ("codex", f"{HOME}/.codex/skills"),
        ("tai", f"{STATE}/tai/skills"),
        ("yaocode", f"{STATE}/yaocode/skills"),
    ],
)
def test_each_runner_has_its_skills_directory(runner: str, root: str) -> None:
    assert skill_root(runner, home=HOME + "/", state_dir=STATE) == root


def test_an_unknown_runner_cannot_receive_skills() -> None:
    with pytest.raises(RunnerError, match="cannot receive skills"):
        skill_root("dsh", home=HOME, state_dir=STATE)


def _skill() -> Skill:
    return Skill(
        name="review",
        path=Path("/app/assistants/a/skills/review"),
        digest="0" * 64,
        files=(
            SkillFile(path="SKILL.md", content="x"),
            SkillFile(path="bin/run.sh", content="y", executable=True),
        ),
    )


def test_files_are_relative_to_the_workspace_and_keep_the_executable_bit() -> None:
    writes = skill_writes([_skill()], root=f"{HOME}/.claude/skills", workspace_root="/workspace")
    assert [(w.path, w.content, w.mode) for w in writes] == [
        (".cage-state/home/.claude/skills/review/SKILL.md", "x", 0o644),
        (".cage-state/home/.claude/skills/review/bin/run.sh", "y", 0o755),
    ]


@pytest.mark.parametrize("root", ["/etc/skills", "/workspace/../etc", "/workspacex/skills"])
def test_a_root_outside_the_workspace_is_refused(root: str) -> None:
    with pytest.raises(RunnerError, match="outside the workspace"):
        skill_writes([_skill()], root=root, workspace_root="/workspace")


def test_the_tai_turn_names_its_skills_directory() -> None:
    connector = ConnectorSpec(id="c", label="c", type=ConnectorType.ANTHROPIC, model="m", base_url="http://m")
    turn = TurnRequest(
        assistant_id="a",
        owner="o",
        session_id="c",
        turn_id="t",
        prompt="hi",
        connector=connector,
        home=HOME,
        state_dir=STATE,
    )
    assert tai_turn(turn).skills_dir == f"{STATE}/tai/skills"
