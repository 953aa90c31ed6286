"""Where each runner finds an assistant's skills inside the box, and the files to put there.

Every CLI discovers skills as `<root>/<name>/SKILL.md` (plus the skill's other files) in a
directory of its own; the pipeline writes them there before the turn, as data:

| runner   | root                                        | found by                                  |
|----------|---------------------------------------------|-------------------------------------------|
| claude   | `$HOME/.claude/skills`                      | Claude Code's user skills (the Skill tool) |
| opencode | `$XDG_CONFIG_HOME/opencode/skills`          | opencode's config-dir skills (`skill` tool)|
| codex    | `$CODEX_HOME/skills`                        | codex's user skills (listed in its prompt) |
| tai      | `<state>/tai/skills`                        | `cage-tai` (manifest + `skill` tool)       |
| yaocode  | `<state>/yaocode/skills`                    | the skill's scripts (the loop on the host) |

HOME, `XDG_CONFIG_HOME` and `CODEX_HOME` are the ones the adapters set (`<workspace>/.cage-state/home`,
its `.config`, its `.codex`). Pure: no I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence
from posixpath import normpath

from orchestrator.dsl import Skill
from orchestrator.errors import RunnerError
from runners.base import FileWrite

_ROOTS = {
    "claude": "{home}/.claude/skills",
    "opencode": "{home}/.config/opencode/skills",
    "codex": "{home}/.codex/skills",
    "tai": "{state}/tai/skills",
    "yaocode": "{state}/yaocode/skills",
}


def skill_root(runner: str, *, home: str, state_dir: str) -> str:
    """The absolute in-box directory where `runner` looks for skills.

    Raises:
        RunnerError: the runner has no skills directory.
    """
    template = _ROOTS.get(runner)
    if template is None:
        raise RunnerError(runner, "this runner cannot receive skills")
    return template.format(home=home.rstrip("/"), state=state_dir.rstrip("/"))


def skill_writes(skills: Sequence[Skill], *, root: str, workspace_root: str) -> tuple[FileWrite, ...]:
    """The skills' files under `root`, as `FileWrite`s relative to `workspace_root`.

    Raises:
        RunnerError: `root` is not inside the workspace.
    """
    base = normpath(workspace_root.rstrip("/") or "/")
    target = normpath(root)
    if not target.startswith(base.rstrip("/") + "/"):
        raise RunnerError("skills", f"skills directory {root!r} is outside the workspace {workspace_root!r}")
    relative = target[len(base.rstrip("/")) + 1 :]
    return tuple(
        FileWrite(
            path=f"{relative}/{skill.name}/{f.path}", content=f.content, mode=0o755 if f.executable else 0o644
        )
        for skill in skills
        for f in skill.files
    )
