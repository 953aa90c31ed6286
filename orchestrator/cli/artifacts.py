"""What `cage run` leaves behind: the workspace diff, the turn summary, and host file ownership.

* `WorkspaceSnapshot.take(root)` before the turn and again after; `before.diff(after)` gives a patch
  that `git apply` accepts and the list of changed files. In a git work tree the snapshot is a tree
  object written through a private index (the user's index and work tree are never touched);
  elsewhere it is a map of file contents and the patch is a file-level unified diff.
* `HostOwnership` lends a bind-mounted workspace to the sandbox user for the turn and gives every
  file back afterwards: existing files to their previous owners, new files to the invoking user.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from orchestrator.stream import Usage

STATE_DIR = ".cage"
"""Runner state inside the workspace (CLI homes, configs): never part of the diff."""
_SKIP_DIRS = {STATE_DIR, ".git"}
_MAX_TEXT = 8 * 2**20


class TurnSummary(BaseModel):
    """`summary.json`."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    assistant: str
    runner: str | None
    chat_id: str
    turn_id: str
    status: str
    stop_reason: str | None = None
    error: str | None = None
    usage: Usage | None = None
    cost_usd: float | None = None
    duration_ms: int = 0
    files_changed: list[str] = []
    exit_code: int = 0


def _git(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(root), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=True,
    )
    return done.stdout


def _is_git_root(root: Path) -> bool:
    try:
        top = _git(root, "rev-parse", "--show-toplevel").strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return False
    return Path(top).resolve() == root.resolve()


def _walk(root: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir == Path():
            dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        for name in filenames:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            files[(rel_dir / name).as_posix()] = path.read_bytes()
    return files


@dataclass(frozen=True)
class WorkspaceSnapshot:
    root: Path
    tree: str | None = None
    """Git tree id of the work tree (git mode)."""
    files: dict[str, bytes] = field(default_factory=dict)
    """Contents by relative path (plain mode)."""

    @classmethod
    def take(cls, root: Path) -> WorkspaceSnapshot:
        root = root.resolve()
        if _is_git_root(root):
            with tempfile.TemporaryDirectory() as tmp:
                env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
                try:
                    _git(root, "read-tree", "HEAD", env=env)
                except subprocess.CalledProcessError:
                    _git(root, "read-tree", "--empty", env=env)
                _git(root, "add", "-A", "--", ".", f":(exclude){STATE_DIR}", env=env)
                return cls(root, tree=_git(root, "write-tree", env=env).strip())
        return cls(root, files=_walk(root))

    def diff(self, after: WorkspaceSnapshot) -> tuple[str, list[str]]:
        """A patch from this snapshot to `after`, and the changed paths (sorted)."""
        if self.tree is not None and after.tree is not None:
            spec = ["--", ".", f":(exclude){STATE_DIR}"]
            patch = _git(self.root, "diff", "--binary", "--full-index", self.tree, after.tree, *spec)
            names = _git(self.root, "diff", "--name-only", self.tree, after.tree, *spec).split()
            return patch, sorted(names)
        changed = sorted(
            p for p in set(self.files) | set(after.files) if self.files.get(p) != after.files.get(p)
        )
        return "".join(_file_diff(p, self.files.get(p), after.files.get(p)) for p in changed), changed


def _lines(data: bytes) -> list[str] | None:
    if len(data) > _MAX_TEXT or b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def _file_diff(path: str, old: bytes | None, new: bytes | None) -> str:
    head = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        head.append("new file mode 100644\n")
    elif new is None:
        head.append("deleted file mode 100644\n")
    old_lines, new_lines = _lines(old or b""), _lines(new or b"")
    if old_lines is None or new_lines is None:
        return "".join(head) + f"Binary files a/{path} and b/{path} differ\n"
    body: list[str] = []
    for line in difflib.unified_diff(
        old_lines,
        new_lines,
        fromfile="/dev/null" if old is None else f"a/{path}",
        tofile="/dev/null" if new is None else f"b/{path}",
    ):
        body.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(head + body)


def invoking_user() -> tuple[int, int]:
    """The user who ran `cage`: the one behind `sudo` when there is one, else the process's."""
    uid, gid = os.environ.get("SUDO_UID"), os.environ.get("SUDO_GID")
    if os.geteuid() == 0 and uid and gid and uid.isdigit() and gid.isdigit():
        return int(uid), int(gid)
    return os.getuid(), os.getgid()


@dataclass
class HostOwnership:
    """Lend a host directory to the sandbox user for one turn, then give every file back.

    Only meaningful when Cage runs as root on the host (a CI job in a container, a root runner);
    otherwise it does nothing and the directory must already be writable by the sandbox uid.
    """

    root: Path
    sandbox_uid: int = 1000
    sandbox_gid: int = 1000
    owner_uid: int = field(default_factory=lambda: invoking_user()[0])
    owner_gid: int = field(default_factory=lambda: invoking_user()[1])
    _owners: dict[str, tuple[int, int]] = field(default_factory=dict)
    active: bool = False

    def lend(self) -> None:
        if os.geteuid() != 0 or self.owner_uid == self.sandbox_uid:
            return
        for path in self._paths():
            st = path.lstat()
            self._owners[str(path)] = (st.st_uid, st.st_gid)
            os.lchown(path, self.sandbox_uid, self.sandbox_gid)
        self.active = True

    def give_back(self) -> None:
        """Previous owners for files that existed; the invoking user for new ones. `.cage/` stays
        with the sandbox user so the next turn can resume."""
        if not self.active:
            return
        for path in self._paths():
            uid, gid = self._owners.get(str(path), (self.owner_uid, self.owner_gid))
            st = path.lstat()
            if (st.st_uid, st.st_gid) != (uid, gid):
                os.lchown(path, uid, gid)
        self.active = False

    def _paths(self) -> list[Path]:
        out = [self.root]
        for dirpath, dirnames, filenames in os.walk(self.root):
            if Path(dirpath) == self.root:
                dirnames[:] = [d for d in dirnames if d != STATE_DIR]
            out += [Path(dirpath) / n for n in (*dirnames, *filenames)]
        return out
