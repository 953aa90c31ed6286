"""`skills/<name>/` folders: front matter, body, files, and what is refused (with the file named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.dsl import AppLoader
from orchestrator.dsl.skills import MAX_SKILL_BYTES, load_skills
from orchestrator.errors import ConfigError
from tests.unit.dsl.conftest import CHAT_PROMPTS, AppWriter

SKILL = """---
name: review
description: >
  Review a diff for bugs.
allowed-tools: Bash(git diff:*)
---
# Review

Read the diff and list problems.
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_front_matter_body_and_files(tmp_path: Path) -> None:
    skills = _write(tmp_path / "skills", {"review/SKILL.md": SKILL, "review/scripts/run.sh": "echo hi\n"})
    (skills / "review" / "scripts" / "run.sh").chmod(0o755)
    (skill,) = load_skills(skills, lambda p: p)
    assert skill.name == "review"
    assert skill.description == "Review a diff for bugs."
    assert skill.body.startswith("# Review") and "list problems" in skill.body and "---" not in skill.body
    assert [(f.path, f.executable) for f in skill.files] == [("SKILL.md", False), ("scripts/run.sh", True)]


def test_without_front_matter_the_first_line_describes_the_skill(tmp_path: Path) -> None:
    skills = _write(tmp_path / "skills", {"notes/SKILL.md": "\n# Keep notes tidy\nMore.\n"})
    (skill,) = load_skills(skills, lambda p: p)
    assert (skill.description, skill.body) == ("Keep notes tidy", "# Keep notes tidy\nMore.")


def test_a_symlink_in_a_skill_is_refused_naming_it(tmp_path: Path) -> None:
    skills = _write(tmp_path / "skills", {"review/SKILL.md": SKILL})
    (skills / "review" / "passwd").symlink_to("/etc/passwd")
    with pytest.raises(ConfigError) as err:
        load_skills(skills, lambda p: p)
    assert "symlink" in str(err.value) and str(err.value.file).endswith("review/passwd")


def test_a_symlinked_skill_folder_is_refused(tmp_path: Path) -> None:
    other = _write(tmp_path / "elsewhere", {"SKILL.md": "x"})
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "review").symlink_to(other)
    with pytest.raises(ConfigError, match="symlink"):
        load_skills(tmp_path / "skills", lambda p: p)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"review/SKILL.md": "---\nname: other\n---\nx"}, "names the skill 'other'"),
        ({"review/SKILL.md": "---\n- a\n---\nx"}, "front matter must be a mapping"),
        ({"review/SKILL.md": "---\ndescription: [1]\n---\nx"}, "description must be text"),
        ({"bad name/SKILL.md": "x"}, "folder name"),
    ],
)
def test_bad_skills_are_refused(tmp_path: Path, files: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_skills(_write(tmp_path / "skills", files), lambda p: p)


def test_binary_and_oversize_skills_are_refused(tmp_path: Path) -> None:
    skills = _write(tmp_path / "skills", {"review/SKILL.md": SKILL})
    (skills / "review" / "blob.bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="UTF-8"):
        load_skills(skills, lambda p: p)
    (skills / "review" / "blob.bin").write_text("x" * (MAX_SKILL_BYTES + 1))
    with pytest.raises(ConfigError, match="larger than"):
        load_skills(skills, lambda p: p)


def test_the_loader_reports_a_bad_skill_with_its_file(write_app: AppWriter) -> None:
    root = write_app(
        {
            "assistants/a/package.yao": '{"name": "A"}',
            "assistants/a/prompts.yml": CHAT_PROMPTS,
            "assistants/a/skills/review/SKILL.md": SKILL,
        }
    )
    (root / "assistants" / "a" / "skills" / "review" / "host").symlink_to("/etc/hostname")
    with pytest.raises(ConfigError) as err:
        AppLoader(root, environ={}, builtin_dir=None).get("a")
    assert "symlink" in str(err.value) and "skills/review/host" in str(err.value.file)


def test_the_shipped_example_skill_loads() -> None:
    repo = Path(__file__).resolve().parents[3]
    loader = AppLoader(repo, environ={"ANTHROPIC_API_KEY": "x", "OPENAI_API_KEY": "x"}, builtin_dir=None)
    (skill,) = loader.get("examples.claude").skills
    assert skill.name == "review" and skill.description.startswith("Review a diff")
