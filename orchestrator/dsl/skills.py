"""An assistant's `skills/<name>/` folders, read as data: `SKILL.md` (front matter + body) and files.

A skill is delivered into the box the way each runner expects it (Claude Code's skills directory,
opencode's and codex's), or, for the native loop, as a manifest line in the system prompt and its
body on demand through the `skill` tool. The files are read here once, as text, and only ever
written into a sandbox: nothing in them is executed or imported on the host. A symlink anywhere
under `skills/` is refused (the host never follows one), as are non-UTF-8 files and oversize skills.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from orchestrator.dsl.yamldoc import parse_yaml
from orchestrator.errors import ConfigError

_STRICT = ConfigDict(extra="forbid", frozen=True)
SKILL_FILE = "SKILL.md"
MAX_SKILL_BYTES = 1024 * 1024
"""All files of one skill together."""
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
"""A skill's folder name: it becomes a directory name inside the box."""
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


class SkillFile(BaseModel):
    """One file of a skill, relative to the skill's folder (POSIX path)."""

    model_config = _STRICT
    path: str
    content: str
    executable: bool = False


class Skill(BaseModel):
    """A folder under `skills/`; `digest` covers every file's relative path and content."""

    model_config = _STRICT
    name: str
    path: Path
    digest: str
    """sha256 hex over the sorted (relative path, content) pairs."""
    description: str = ""
    """`description` of the `SKILL.md` front matter, else the body's first line."""
    body: str = ""
    """`SKILL.md` without its front matter."""
    files: tuple[SkillFile, ...] = ()
    """Every file of the skill, `SKILL.md` included, in path order."""


def load_skills(directory: Path, rel: Callable[[Path], Path | str]) -> tuple[Skill, ...]:
    """The skills under `directory` (`skills/`), by folder name.

    Raises:
        ConfigError: a symlink, a bad folder name, a non-UTF-8 or oversize skill, a bad front
            matter, or a front-matter `name` that differs from the folder's.
    """
    if directory.is_symlink():
        raise ConfigError("skills/ must not be a symlink", file=rel(directory))
    if not directory.is_dir():
        return ()
    skills = []
    for folder in sorted(p for p in directory.iterdir() if not p.name.startswith(".")):
        if folder.is_symlink():
            raise ConfigError("a skill must not be a symlink", file=rel(folder))
        if not folder.is_dir():
            continue
        if not NAME_PATTERN.match(folder.name):
            raise ConfigError(
                "a skill folder name is letters, digits, '.', '_' or '-' (at most 64)", file=rel(folder)
            )
        skills.append(_skill(folder, rel))
    return tuple(skills)


def _files(folder: Path, rel: Callable[[Path], Path | str]) -> list[Path]:
    found: list[Path] = []
    for root, dirs, names in os.walk(folder, followlinks=False):
        base = Path(root)
        for name in [*dirs, *names]:
            if (base / name).is_symlink():
                raise ConfigError(
                    "a symlink in a skill is refused (copy the file instead)", file=rel(base / name)
                )
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found.extend(base / n for n in names if not n.startswith("."))
    return sorted(found, key=lambda f: f.relative_to(folder).as_posix())


def _skill(folder: Path, rel: Callable[[Path], Path | str]) -> Skill:
    digest = hashlib.sha256()
    files: list[SkillFile] = []
    total = 0
    for file in _files(folder, rel):
        relative = file.relative_to(folder).as_posix()
        raw = file.read_bytes()
        total += len(raw)
        if total > MAX_SKILL_BYTES:
            raise ConfigError(
                f"skill {folder.name!r} is larger than {MAX_SKILL_BYTES} bytes", file=rel(folder)
            )
        encoded = relative.encode()
        digest.update(len(encoded).to_bytes(4, "big") + encoded)
        digest.update(len(raw).to_bytes(8, "big") + raw)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError("a skill file must be UTF-8 text", file=rel(file)) from None
        files.append(SkillFile(path=relative, content=text, executable=os.access(file, os.X_OK)))
    main = next((f for f in files if f.path == SKILL_FILE), None)
    description, body = "", ""
    if main is not None:
        description, body = _front_matter(folder, main.content, rel)
    return Skill(
        name=folder.name,
        path=folder,
        digest=digest.hexdigest(),
        description=description,
        body=body,
        files=tuple(files),
    )


def _front_matter(folder: Path, text: str, rel: Callable[[Path], Path | str]) -> tuple[str, str]:
    """(description, body) of a `SKILL.md`."""
    file = rel(folder / SKILL_FILE)
    match = _FRONT.match(text)
    body = text[match.end() :] if match else text
    description = ""
    if match:
        meta = parse_yaml(match.group(1), file=file).value
        if meta is not None and not isinstance(meta, dict):
            raise ConfigError("the SKILL.md front matter must be a mapping", file=file, line=2)
        meta = meta or {}
        name = meta.get("name")
        if name is not None and name != folder.name:
            raise ConfigError(
                f"SKILL.md names the skill {name!r} but its folder is {folder.name!r}; make them equal",
                file=file,
                key_path="name",
            )
        value = meta.get("description")
        if value is not None and not isinstance(value, str):
            raise ConfigError("description must be text", file=file, key_path="description")
        description = (value or "").strip()
    if not description:
        description = next(
            (line.strip().lstrip("#").strip() for line in body.splitlines() if line.strip()), ""
        )
    return description, body.strip()
