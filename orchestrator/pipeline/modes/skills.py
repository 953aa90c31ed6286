"""Writes an assistant's skills into its box before a runner's turn, where that runner looks.

The files come from the assistant's own `skills/` folder (read once at load, symlinks refused)
and go in as data through `put_files`, owned by the box's user; nothing of them runs on the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from orchestrator.dsl import Skill
from orchestrator.sandbox.backend import FileEntry
from runners.skills import skill_root, skill_writes


class FileSink(Protocol):
    async def put_files(self, dest_dir: str, files: Sequence[FileEntry]) -> None: ...


async def deliver_skills(
    sandbox: FileSink,
    runner: str,
    skills: Sequence[Skill],
    *,
    home: str,
    state_dir: str,
    workspace_root: str,
) -> str | None:
    """Put `skills` under `runner`'s skills directory in the box; that directory, or None without skills.

    Raises:
        RunnerError: the runner has no skills directory, or it lies outside the workspace.
        SandboxError: the files could not be written.
    """
    if not skills:
        return None
    root = skill_root(runner, home=home, state_dir=state_dir)
    writes = skill_writes(skills, root=root, workspace_root=workspace_root)
    entries = [FileEntry(path=w.path, content=w.content.encode(), mode=w.mode) for w in writes]
    await sandbox.put_files(workspace_root, entries)
    return root
