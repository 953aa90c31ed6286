"""The native loop's skill face: a manifest (name + description) in the system prompt, the body of
a skill on demand through the `skill` tool.

The body is what the skill's `SKILL.md` says below its front matter, capped at
`MAX_BODY_CHARS`; the manifest's descriptions are capped at `MAX_DESCRIPTION_CHARS`. `location`
names the skill's folder inside the box (its scripts and references are there), when the files
were delivered.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.dsl.skills import Skill, load_skills
from orchestrator.llm.tools.base import ArgsModel, ToolContext, ToolResult, TypedTool

MAX_DESCRIPTION_CHARS = 1536
MAX_BODY_CHARS = 16 * 1024
TOOL_NAME = "skill"


class SkillCard(BaseModel):
    """One skill as the loop offers it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    description: str = ""
    body: str = ""
    location: str | None = None
    """The skill's folder in the box, if its files are there."""


def cards(skills: Iterable[Skill], *, root: str | None = None) -> tuple[SkillCard, ...]:
    """Cards of loaded skills; `root`: the in-box directory their files were written to."""
    return tuple(
        SkillCard(
            name=s.name,
            description=s.description,
            body=s.body,
            location=f"{root.rstrip('/')}/{s.name}" if root else None,
        )
        for s in skills
    )


def cards_from_dir(directory: Path) -> tuple[SkillCard, ...]:
    """Cards of the skills written to `directory` (`cage-tai`, inside the box).

    Raises:
        ConfigError: a skill there is malformed (a symlink, not UTF-8, too large...).
    """
    return cards(load_skills(directory, lambda p: p), root=str(directory))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def skills_manifest(skills: Sequence[SkillCard]) -> str:
    """The system-prompt section listing the skills ("" without any)."""
    if not skills:
        return ""
    lines = [
        "# Skills",
        f"Skills hold instructions for particular tasks. When a task matches a skill's description, "
        f"call the `{TOOL_NAME}` tool with its name before you start, then follow what it returns.",
    ]
    for skill in skills:
        description = " ".join(skill.description.split())
        lines.append(f"- {skill.name}: {_clip(description, MAX_DESCRIPTION_CHARS)}")
    return "\n".join(lines)


def with_skills(system: str, skills: Sequence[SkillCard]) -> str:
    """`system` with the skills manifest appended."""
    manifest = skills_manifest(skills)
    return f"{system}\n\n{manifest}" if system and manifest else system or manifest


class SkillArgs(ArgsModel):
    name: str = Field(min_length=1)
    """The skill's name, as listed under Skills in the system prompt."""


class SkillTool(TypedTool[SkillArgs]):
    """Returns a skill's instructions."""

    name = TOOL_NAME
    description = "Load the instructions of one of the skills listed in the system prompt, by name."
    read_only = True
    args_model = SkillArgs

    def __init__(self, skills: Sequence[SkillCard]) -> None:
        self._skills = {s.name: s for s in skills}

    async def call(self, args: SkillArgs, ctx: ToolContext) -> ToolResult:
        skill = self._skills.get(args.name)
        if skill is None:
            known = ", ".join(sorted(self._skills)) or "none"
            return ToolResult.error(f"no skill named {args.name!r}; skills: {known}")
        body = _clip(skill.body, MAX_BODY_CHARS)
        if skill.location:
            body += f"\n\n(The skill's files are in {skill.location}.)"
        return ToolResult(output=body, metadata={"skill": skill.name})
