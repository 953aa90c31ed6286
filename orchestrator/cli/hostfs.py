"""Host file access under a directory the agent could write: nothing is followed, nothing blocks.

`cage run` reads the checkout after the agent had it (the snapshot) and writes its artifacts. A path
there may be a symlink to any host file, a fifo that blocks a reader forever, or a device. So every
component is opened relative to its parent's file descriptor with `O_NOFOLLOW` (a symlink in the
middle of a path is refused, not resolved), the last one with `O_NONBLOCK` and checked with `fstat`
to be a regular file before a byte is read. Symlinks themselves are read as links (`readlink`),
which follows nothing.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

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
    return _under(os.path.realpath(path), os.path.realpath(root))


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def read_named_file(path: Path, workspace: Path, *, limit: int) -> bytes:
    """A file the command line names (`--prompt-file`), read without following a link the checkout
    holds: inside the workspace only a regular file reached through real directories is read.

    Raises:
        OSError: unreadable, not a regular file, a link inside the workspace, or over `limit` bytes.
    """
    lexical = Path(os.path.normpath(Path.cwd() / path))  # no link resolved
    parent = Path(os.path.realpath(lexical.parent))
    root = os.path.realpath(workspace)
    really_inside = _under(str(parent), root)
    if not really_inside and (_under(str(lexical), root) or _under(str(lexical), str(workspace))):
        raise OSError(errno.ELOOP, "reached through a symbolic link inside the workspace")
    inside = really_inside
    flags = _FILE_FLAGS if inside else os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(parent / lexical.name, flags)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes")
    return data
