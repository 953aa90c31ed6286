"""The checkout before and after a `cage run` turn, and `changes.patch`, without trusting the checkout.

After the turn every byte of the checkout may be the agent's, and before it the checkout may be a
pull request's (or an archive with its own `.git`). Host git pointed at that repository runs what
its config says (`core.fsmonitor`, clean filters, `diff.external`, textconv, hooks): code execution
on the host. So the host's git never sees the checkout's repository at all:

* Cage itself reads the files (`hostfs`: no symlink followed, fifos and devices skipped, regular
  files streamed in chunks, files over `MAX_FILE_BYTES` and anything past `MAX_TOTAL_BYTES` skipped
  and reported, so a sparse 100 GB file costs one `stat`). Symlinks are recorded as links.
* The contents go into a **private** bare repository in a scratch directory outside the workspace
  (under the run's data dir), through `git fast-import` (streamed, bounded memory). Its config is
  ours; `GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`, `GIT_ATTR_NOSYSTEM`, no hooks, no
  fsmonitor, no attributes file; no `safe.directory` override is needed since the repository is ours.
* Which files: `git ls-files --others --exclude-standard` with that private `GIT_DIR` and the
  checkout as work tree. It reads `.gitignore` files as data (and never follows a symlinked one);
  the checkout's `.git` is never opened. Paths present before the turn stay in the after snapshot
  even if a new `.gitignore` matches them, so an agent cannot hide an edit behind one.
* The patch is `git diff-tree --binary` between the two private commits, with `--no-ext-diff
  --no-textconv`, streamed to the output file.

One code path for git and plain directories; in-sandbox computation was the alternative, but the
box is gone by the time the patch is made (nothing may still be writing) and an in-box result would
again be agent-made data for the host to trust.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from orchestrator.cli.hostfs import Entry, dir_fd, entry_beneath
from orchestrator.errors import CageError
from runners.base import IN_BOX_STATE

MAX_FILE_BYTES = 32 * 2**20
"""Files larger than this are left out of the snapshot (and named in `summary.json`)."""
MAX_TOTAL_BYTES = 1024 * 2**20
"""Bytes read per snapshot; files past this budget are left out (and named)."""
MAX_FILES = 200_000
_CHUNK = 2**20
_EXCLUDED_TOP = {IN_BOX_STATE.encode(), b".git"}
"""Never part of the patch: the runners' state, and the repository itself."""
_COMMITTER = b"committer cage <cage@localhost> 0 +0000\n"


class SnapshotError(CageError):
    """The private git failed (git missing, disk full)."""

    code = "snapshot_failed"


@dataclass(frozen=True)
class Snapshot:
    commit: str
    """Commit id in the private repository."""
    paths: frozenset[bytes]
    skipped: dict[str, str] = field(default_factory=dict)
    """Path -> why it is not in the snapshot."""


def _quote(path: bytes) -> bytes:
    """fast-import's C-style quoted path: only printable ASCII stays as it is."""
    out = bytearray(b'"')
    for byte in path:
        if byte in (0x22, 0x5C):
            out += b"\\" + bytes([byte])
        elif 0x20 <= byte < 0x7F:
            out.append(byte)
        else:
            out += b"\\%03o" % byte
    return bytes(out + b'"')


def _shown(path: bytes) -> str:
    return path.decode("utf-8", errors="backslashreplace")


class PrivateRepo:
    """A throwaway bare repository that holds snapshots of one checkout. Use as a context manager."""

    def __init__(self, scratch: Path) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="snapshot-", dir=scratch))
        self.git_dir = self.dir / "repo.git"
        self._count = 0
        self._git("init", "-q", "--bare", "--template=", str(self.git_dir), git_dir=False)

    def __enter__(self) -> PrivateRepo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the repository and everything it holds."""
        shutil.rmtree(self.dir, ignore_errors=True)

    def _env(self, work_tree: Path | None) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.dir),
            "LC_ALL": "C",
            "GIT_DIR": str(self.git_dir),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
        }
        if work_tree is not None:
            env["GIT_WORK_TREE"] = str(work_tree)
        return env

    def _argv(self, *args: str) -> list[str]:
        return [
            "git",
            "-c", "core.fsmonitor=false",
            "-c", "core.hooksPath=/dev/null",
            "-c", "core.attributesFile=/dev/null",
            "-c", "core.excludesFile=/dev/null",
            "-c", "core.quotePath=true",
            *args,
        ]  # fmt: skip

    def _git(self, *args: str, work_tree: Path | None = None, git_dir: bool = True) -> bytes:
        env = self._env(work_tree)
        if not git_dir:
            env.pop("GIT_DIR")
        try:
            done = subprocess.run(
                self._argv(*args),
                env=env,
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                check=False,
            )
        except OSError as exc:
            raise SnapshotError(f"cannot run git: {exc}") from exc
        if done.returncode != 0:
            raise SnapshotError(f"git {args[0]} failed: {done.stderr.decode(errors='replace')[-500:]}")
        return done.stdout

    def _listing(self, root: Path) -> list[bytes]:
        out = self._git("ls-files", "-z", "--others", "--exclude-standard", work_tree=root)
        return [p for p in out.split(b"\0") if p]

    def take(self, root: Path, *, keep: frozenset[bytes] = frozenset()) -> Snapshot:
        """Snapshot `root`: the files git would see as untracked-and-not-ignored, plus `keep`.

        Raises:
            SnapshotError: git failed.
        """
        listed = set(self._listing(root)) | set(keep)
        skipped: dict[str, str] = {}
        paths: list[bytes] = []
        for rel in sorted(listed):
            top = rel.split(b"/", 1)[0]
            if top in _EXCLUDED_TOP:
                continue
            if rel.endswith(b"/"):
                skipped[_shown(rel)] = "a nested repository: not part of the patch"
                continue
            paths.append(rel)
        if len(paths) > MAX_FILES:
            for rel in paths[MAX_FILES:]:
                skipped[_shown(rel)] = f"more than {MAX_FILES} files: left out"
            paths = paths[:MAX_FILES]
        self._count += 1
        ref = f"refs/cage/snapshot-{self._count}"
        seen: set[bytes] = set()
        with dir_fd(root) as root_fd, tempfile.TemporaryFile(dir=self.dir) as errors:
            proc = subprocess.Popen(
                self._argv("fast-import", "--quiet", "--done"),
                env=self._env(None),
                cwd=self.dir,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=errors,
            )
            assert proc.stdin is not None
            try:
                lines = self._blobs(proc.stdin, root_fd, paths, skipped, seen)
                proc.stdin.write(b"commit " + ref.encode() + b"\n" + _COMMITTER + b"data 0\n")
                for line in lines:
                    proc.stdin.write(line)
                proc.stdin.write(b"\ndone\n")
                proc.stdin.close()
            except BrokenPipeError:
                pass
            proc.wait()
            errors.seek(0)
            err = errors.read(4096)
        if proc.returncode != 0:
            raise SnapshotError(f"git fast-import failed: {err.decode(errors='replace')[-500:]}")
        commit = self._git("rev-parse", "--verify", ref).decode().strip()
        return Snapshot(commit=commit, paths=frozenset(seen), skipped=skipped)

    def _blobs(
        self, sink: IO[bytes], root_fd: int, paths: list[bytes], skipped: dict[str, str], seen: set[bytes]
    ) -> list[bytes]:
        """Write one blob per path; return the commit's `M` lines."""
        budget = MAX_TOTAL_BYTES
        lines: list[bytes] = []
        for mark, rel in enumerate(paths, start=1):
            entry = entry_beneath(root_fd, rel)
            if entry.kind == "symlink":
                sink.write(b"blob\nmark :%d\ndata %d\n" % (mark, len(entry.target)) + entry.target + b"\n")
                lines.append(b"M 120000 :%d %s\n" % (mark, _quote(rel)))
                seen.add(rel)
                continue
            if entry.kind == "other":
                skipped[_shown(rel)] = "not a regular file or symlink (fifo, socket, device)"
            if entry.kind != "file" or entry.fd is None:
                continue
            try:
                if entry.size > MAX_FILE_BYTES:
                    skipped[_shown(rel)] = f"larger than {MAX_FILE_BYTES // 2**20} MiB ({entry.size} bytes)"
                    continue
                if entry.size > budget:
                    skipped[_shown(rel)] = f"snapshot budget of {MAX_TOTAL_BYTES // 2**20} MiB used up"
                    continue
                budget -= entry.size
                sink.write(b"blob\nmark :%d\ndata %d\n" % (mark, entry.size))
                _copy_exactly(entry, sink)
                sink.write(b"\n")
            finally:
                os.close(entry.fd)
            executable = entry.mode & 0o100
            lines.append(b"M %s :%d %s\n" % (b"100755" if executable else b"100644", mark, _quote(rel)))
            seen.add(rel)
        return lines

    def diff(self, before: Snapshot, after: Snapshot, out: IO[bytes] | None) -> list[str]:
        """Write the patch from `before` to `after` into `out` (when given); return the changed paths.

        A path skipped in either snapshot is left out of both, so it never shows as added or deleted.

        Raises:
            SnapshotError: git failed.
        """
        left, right = before.commit, after.commit
        hidden = set(before.skipped) | set(after.skipped)
        if hidden:
            left, right = self._without(before.commit, hidden), self._without(after.commit, hidden)
        args = ("diff-tree", "-r", "--no-renames", "--no-ext-diff", "--no-textconv")
        names = self._git(*args, "--name-only", "-z", left, right)
        if out is not None:
            self._stream(out, *args, "-p", "--binary", "--full-index", left, right)
        return sorted(_shown(p) for p in names.split(b"\0") if p)

    def _stream(self, out: IO[bytes], *args: str) -> None:
        """Run git, copying its stdout into `out` chunk by chunk (a patch may be large)."""
        with tempfile.TemporaryFile(dir=self.dir) as errors:
            try:
                proc = subprocess.Popen(
                    self._argv(*args),
                    env=self._env(None),
                    cwd=self.dir,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=errors,
                )
            except OSError as exc:
                raise SnapshotError(f"cannot run git: {exc}") from exc
            assert proc.stdout is not None
            while chunk := proc.stdout.read(_CHUNK):
                out.write(chunk)
            proc.stdout.close()
            if proc.wait() != 0:
                errors.seek(0)
                raise SnapshotError(f"git {args[0]} failed: {errors.read(4096).decode(errors='replace')}")

    def _without(self, commit: str, paths: set[str]) -> str:
        self._count += 1
        ref = f"refs/cage/view-{self._count}"
        stream = b"commit " + ref.encode() + b"\n" + _COMMITTER + b"data 0\nfrom " + commit.encode() + b"\n"
        stream += b"".join(b"D " + _quote(os.fsencode(p)) + b"\n" for p in sorted(paths)) + b"\ndone\n"
        try:
            done = subprocess.run(
                self._argv("fast-import", "--quiet", "--done"),
                env=self._env(None),
                cwd=self.dir,
                input=stream,
                capture_output=True,
                check=False,
            )
        except OSError as exc:
            raise SnapshotError(f"cannot run git: {exc}") from exc
        if done.returncode != 0:
            raise SnapshotError(f"git fast-import failed: {done.stderr.decode(errors='replace')[-500:]}")
        return self._git("rev-parse", "--verify", ref).decode().strip()


def _copy_exactly(entry: Entry, sink: IO[bytes]) -> None:
    """`entry.size` bytes of the file into `sink`: a file that shrank meanwhile is padded with zeros."""
    assert entry.fd is not None
    left = entry.size
    while left:
        try:
            chunk = os.read(entry.fd, min(_CHUNK, left))
        except BlockingIOError:
            chunk = b""
        if not chunk:  # shrank since the stat
            chunk = b"\0" * min(_CHUNK, left)
        sink.write(chunk)
        left -= len(chunk)
