"""Tar archives for `put_archive` / `get_archive` (pure functions, run in worker threads)."""

from __future__ import annotations

import io
import posixpath
import tarfile
import time
from collections.abc import Iterable, Sequence

from orchestrator.sandbox.backend import FileEntry


def _dir_info(name: str, uid: int, gid: int, mode: int = 0o755) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    info.uid, info.gid = uid, gid
    info.mtime = int(time.time())
    return info


def files_tar(files: Sequence[FileEntry]) -> bytes:
    """A tar of `files` (paths relative to the extraction dir) with their parent directories.

    Parent directories get the owner of the first file below them, so files written for the
    `sandbox` user land in directories that user can also write.
    """
    buf = io.BytesIO()
    seen: set[str] = set()
    now = int(time.time())
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for entry in files:
            rel = posixpath.normpath(entry.path.lstrip("/"))
            if rel in (".", "", "..") or rel.startswith("../"):
                raise ValueError(f"file path must stay below the destination: {entry.path!r}")
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                parent = "/".join(parts[:i])
                if parent not in seen:
                    seen.add(parent)
                    tar.addfile(_dir_info(parent, entry.uid, entry.gid))
            info = tarfile.TarInfo(rel)
            info.size = len(entry.content)
            info.mode = entry.mode
            info.uid, info.gid = entry.uid, entry.gid
            info.mtime = now
            tar.addfile(info, io.BytesIO(entry.content))
    return buf.getvalue()


def dir_tar(name: str, *, uid: int, gid: int, mode: int = 0o755) -> bytes:
    """A tar holding one directory entry: extracting it into the parent sets the dir's owner."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.addfile(_dir_info(name, uid, gid, mode))
    return buf.getvalue()


def read_single_file(chunks: Iterable[bytes], *, limit: int) -> bytes:
    """The content of the one regular file in a tar stream, reading at most `limit` bytes."""
    data = bytearray()
    for chunk in chunks:
        data += chunk
        if len(data) > limit + 1024 * 1024:
            raise ValueError(f"file is larger than {limit} bytes")
    with tarfile.open(fileobj=io.BytesIO(bytes(data)), mode="r") as tar:
        for member in tar:
            if member.isfile():
                if member.size > limit:
                    raise ValueError(f"file is larger than {limit} bytes")
                fh = tar.extractfile(member)
                if fh is None:
                    break
                return fh.read()
    raise IsADirectoryError("not a regular file")
