"""`--output-dir`: where `cage run` writes `events.jsonl`, `summary.json` and `changes.patch`.

The host writes these files, in CI often as root. A path the agent (or the pull request) can reach
would let it plant `changes.patch -> /root/.bashrc` and have the host overwrite any file. So:

* a directory inside the workspace is refused before anything runs (`UsageError`, exit 2);
* the directory is created by `cage run` when missing and held open by descriptor (a symlink in
  its place is refused), and each artifact is written relative to that descriptor with
  `O_CREAT | O_EXCL | O_NOFOLLOW` after unlinking whatever had the name (an old run's file, or a
  planted symlink, which is removed, never followed).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from orchestrator.cli.hostfs import is_within, open_dir
from orchestrator.errors import UsageError

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


_PLANT = "the agent could plant links there, and Cage keeps its own files outside the checkout"


def refuse_inside(path: Path, workspace: Path, flag: str, why: str = _PLANT) -> None:
    """Refuse a host path Cage relies on that the sandbox could reach.

    Raises:
        UsageError: `path` is the workspace or inside it (symlinks resolved), naming `flag`.
    """
    if is_within(path, workspace):
        raise UsageError(
            f"{flag} {path}: inside the workspace {workspace}; {why} (pick a directory outside it)"
        )


class ArtifactDir:
    """The output directory, open by descriptor; files are created fresh, never through a link."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.mkdir(parents=True, exist_ok=True)
            self.fd = open_dir(path)
        except OSError as exc:
            raise UsageError(f"--output-dir {path}: {exc.strerror or exc}") from exc

    def create(self, name: str) -> IO[bytes]:
        """A new, empty file `name` in the directory (an old file or link of that name is removed)."""
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            pass
        except IsADirectoryError as exc:
            raise UsageError(f"--output-dir {self.path}: {name} is a directory") from exc
        fd = os.open(name, _CREATE, 0o644, dir_fd=self.fd)
        return os.fdopen(fd, "wb")

    def write(self, name: str, data: bytes) -> None:
        with self.create(name) as fh:
            fh.write(data)

    def close(self) -> None:
        os.close(self.fd)
