"""Host file access under a directory the agent could write: nothing is followed, nothing blocks.

`cage run` reads the checkout after the agent had it (the snapshot) and writes its artifacts. A path
there may be a symlink to any host file, a fifo that blocks a reader forever, or a device. So every
component is opened relative to its parent's file descriptor with `O_NOFOLLOW` (a symlink in the
middle of a path is refused, not resolved), the last one with `O_NONBLOCK` and checked with `fstat`
to be a regular file before a byte is read. Symlinks themselves are read as links (`readlink`),
which follows nothing.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass(frozen=True)
class Entry:
    """What a path names, seen without following it."""

    kind: str
    """`file`, `symlink`, `other` (fifo, socket, device, directory) or `missing` (also: a parent is
    not a real directory)."""
    mode: int = 0
    size: int = 0
    target: bytes = b""
    """The link's target (symlinks)."""
    fd: int | None = None
    """An open, non-blocking descriptor (regular files); the caller closes it."""


def open_dir(path: str | bytes | os.PathLike[str]) -> int:
    """A descriptor on the directory `path` itself (a symlink there is refused)."""
    return os.open(path, _DIR_FLAGS)


@contextmanager
def dir_fd(path: str | bytes | os.PathLike[str]) -> Iterator[int]:
    fd = open_dir(path)
    try:
        yield fd
    finally:
        os.close(fd)


def entry_beneath(root_fd: int, rel: bytes) -> Entry:
    """Open `rel` (slash-separated, relative) under `root_fd` without following any symlink.

    A symlinked or missing parent directory gives `missing`; anything that is neither a regular file
    nor a symlink gives `other`. Never raises for what the tree holds; only for a bad `rel`.
    """
    parts = [p for p in rel.split(b"/") if p]
    if not parts or any(p in (b".", b"..") for p in parts):
        raise ValueError(f"not a relative path: {rel!r}")
    fds: list[int] = []
    try:
        parent = root_fd
        for part in parts[:-1]:
            try:
                parent = os.open(part, _DIR_FLAGS, dir_fd=parent)
            except OSError:
                return Entry("missing")
            fds.append(parent)
        name = parts[-1]
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError:
            return Entry("missing")
        if stat.S_ISLNK(st.st_mode):
            try:
                return Entry("symlink", target=os.readlink(name, dir_fd=parent))
            except OSError:
                return Entry("missing")
        if not stat.S_ISREG(st.st_mode):
            return Entry("other")
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
        except OSError:
            return Entry("other")
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped between the stat and the open
            os.close(fd)
            return Entry("other")
        return Entry("file", mode=st.st_mode, size=st.st_size, fd=fd)
    finally:
        for fd in fds:
            os.close(fd)


def is_within(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """True when `path` is `root` or below it, both with symlinks resolved."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip("/") + "/")
