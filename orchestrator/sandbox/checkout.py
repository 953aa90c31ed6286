"""How a host checkout is mounted in CI mode: work tree writable, `.git` read-only, config sanitized.

The checkout's `.git` is the job's, not the agent's. Later CI steps run git there on the host, so a
hook or a `core.fsmonitor` the agent planted would run outside the box; and `actions/checkout`
persists the job token in `.git/config` (`http.<url>.extraheader`), which the agent must not read.
So the checkout is bind-mounted with, on top of it:

* `.git` bind-mounted again, **read-only**: no hook, config or ref can be planted;
* `.git/config` (and each submodule's `.git/modules/**/config`) covered by a read-only copy that
  keeps only what reading the repository needs (format version and extensions, remotes with any
  credentials stripped from their URLs, branch tracking). Everything else — `extraheader`,
  `credential.*`, `url.*.insteadOf`, includes, hooks and fsmonitor settings — is left out.

The original config is read with `O_NOFOLLOW` and parsed by git as data (`git config --file
--no-includes --list`, no repository around it), which runs nothing. A `.git` that is a symlink is
refused: the engine would resolve it on the host. A `.git` file (worktrees, submodules) is mounted
read-only; what it points to lies outside the checkout and is not mounted.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from orchestrator.errors import WorkspaceError
from orchestrator.sandbox.backend import BindMount

_KEEP_EXACT = {
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
}
_KEEP_SECTION_KEYS = {("remote", "url"), ("remote", "fetch"), ("branch", "remote"), ("branch", "merge")}
_MAX_CONFIG_BYTES = 1 << 20
_MAX_SUBMODULES = 256


def checkout_mounts(
    host_path: Path, mount_path: str, *, read_only: bool, scratch: Path
) -> tuple[BindMount, ...]:
    """The bind mounts for a host checkout at `mount_path`; sanitized configs are written to `scratch`.

    Raises:
        WorkspaceError: `host_path` is not a directory, or its `.git` is a symlink or unreadable.
    """
    root = host_path.resolve()
    if not root.is_dir():
        raise WorkspaceError(str(host_path), "host workspace must be an existing directory")
    target = mount_path.rstrip("/") or "/"
    mounts = [BindMount(source=str(root), target=target, read_only=read_only)]
    git = root / ".git"
    try:
        st = git.lstat()
    except FileNotFoundError:
        return tuple(mounts)
    if stat.S_ISLNK(st.st_mode):
        raise WorkspaceError(str(git), "is a symbolic link; Cage mounts only a real .git directory or file")
    git_target = f"{target.rstrip('/')}/.git"
    mounts.append(BindMount(source=str(git), target=git_target, read_only=True))
    if stat.S_ISDIR(st.st_mode):
        for rel in _configs(git):
            clean = sanitized_config(_read_nofollow(git / rel))
            mounts.append(
                BindMount(source=str(_store(scratch, clean)), target=f"{git_target}/{rel}", read_only=True)
            )
    return tuple(mounts)


def _configs(git: Path) -> list[str]:
    """`config` and the submodules' `modules/**/config`, as paths relative to `.git` (regular files only)."""
    found = ["config"] if _is_file(git / "config") else []
    modules = git / "modules"
    if _is_dir(modules):
        for dirpath, dirnames, filenames in os.walk(modules):  # never follows symlinked directories
            dirnames.sort()
            if "config" in filenames and "HEAD" in filenames and _is_file(Path(dirpath) / "config"):
                found.append(str((Path(dirpath) / "config").relative_to(git)))
                if len(found) > _MAX_SUBMODULES:
                    break
    return found


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _read_nofollow(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise WorkspaceError(str(path), f"cannot read the repository config: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as fh:
        return fh.read(_MAX_CONFIG_BYTES)


def _entries(raw: bytes) -> list[tuple[str, str]]:
    """`key, value` pairs of a git config file, parsed by git with nothing else around it."""
    with tempfile.TemporaryDirectory(prefix="cage-gitconfig-") as tmp:
        copy = Path(tmp) / "config"
        copy.write_bytes(raw)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": tmp,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "LC_ALL": "C",
        }
        try:
            done = subprocess.run(
                ["git", "config", "--file", str(copy), "--no-includes", "--null", "--list"],
                env=env,
                cwd=tmp,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                check=False,
            )
        except OSError:
            return []
    if done.returncode != 0:
        return []  # unparsable: the sanitized config is the minimal one
    pairs = []
    for item in done.stdout.split(b"\0"):
        if not item:
            continue
        key, _, value = item.decode("utf-8", errors="replace").partition("\n")
        pairs.append((key, value))
    return pairs


def _strip_credentials(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    if parts.scheme and "@" in parts.netloc:
        return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return url


def _kept(key: str, value: str) -> tuple[str, str, str, str] | None:
    """`(section, subsection, name, value)` for an entry worth keeping, else None."""
    section, _, rest = key.partition(".")
    subsection, _, name = rest.rpartition(".")
    if key in _KEEP_EXACT or section == "extensions":
        return section, subsection, name, value
    if subsection and (section, name) in _KEEP_SECTION_KEYS:
        return section, subsection, name, _strip_credentials(value) if name == "url" else value
    return None


_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"})


def _quoted(text: str) -> str:
    return '"' + text.translate(_ESCAPES) + '"'


def sanitized_config(raw: bytes) -> bytes:
    """A config holding only the allowlisted entries of `raw` (always at least a `[core]` section)."""
    sections: dict[tuple[str, str], list[str]] = {("core", ""): []}
    for key, value in _entries(raw):
        kept = _kept(key, value)
        if kept is None:
            continue
        section, subsection, name, val = kept
        sections.setdefault((section, subsection), []).append(f"\t{name} = {_quoted(val)}\n")
    out = []
    for (section, subsection), lines in sections.items():
        out.append(f"[{section} {_quoted(subsection)}]\n" if subsection else f"[{section}]\n")
        out.extend(lines)
    return "".join(out).encode()


def _store(scratch: Path, content: bytes) -> Path:
    """`content` in a file under `scratch` named by its digest (identical copies are shared)."""
    folder = scratch / "git-configs"
    folder.mkdir(parents=True, exist_ok=True, mode=0o755)
    path = folder / f"{hashlib.sha256(content).hexdigest()[:32]}.config"
    if not _is_file(path):
        fd, tmp = tempfile.mkstemp(dir=folder)
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
        Path(tmp).chmod(0o644)
        Path(tmp).replace(path)
    return path


def checkout_owner(host_path: Path) -> tuple[int, int]:
    """The uid and gid that own the checkout: the agent runs as them, so its files are theirs.

    Raises:
        WorkspaceError: the checkout is missing or owned by root (Cage never runs an agent as root).
    """
    try:
        st = host_path.stat()
    except OSError as exc:
        raise WorkspaceError(str(host_path), f"cannot stat the host workspace: {exc.strerror}") from exc
    if st.st_uid == 0 or st.st_gid == 0:
        raise WorkspaceError(
            str(host_path),
            "is owned by root (or the root group); the agent runs as the checkout's owner and never as "
            "root: chown the checkout to the non-root user that should own the agent's edits, or check "
            "it out as that user",
        )
    return st.st_uid, st.st_gid
