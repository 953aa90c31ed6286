"""`changes.patch` from two private snapshots: correct, bounded, and blind to the checkout's git config."""

from __future__ import annotations

import io
import os
import resource
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from orchestrator.cli.snapshot import MAX_FILE_BYTES, PrivateRepo

_ID = ["-c", "user.email=t@t", "-c", "user.name=t"]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *_ID, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _seed(root: Path) -> None:
    root.mkdir()
    (root / "a.txt").write_text("one\ntwo\n")
    (root / "b.txt").write_text("bye\n")
    (root / "tool.sh").write_text("#!/bin/sh\n")
    (root / "tool.sh").chmod(0o755)


def _change(root: Path) -> None:
    (root / "a.txt").write_text("one\nTWO\n")
    (root / "b.txt").unlink()
    (root / "new.txt").write_text("fresh")  # no trailing newline
    (root / "bin.dat").write_bytes(bytes(range(256)))
    (root / "link").symlink_to("a.txt")
    (root / ".cage-state" / "home").mkdir(parents=True)
    (root / ".cage-state" / "home" / "session.json").write_text("{}")


def _diff(repo: PrivateRepo, root: Path, change: object) -> tuple[bytes, list[str], dict[str, str]]:
    before = repo.take(root)
    assert callable(change)
    change(root)
    after = repo.take(root, keep=before.paths)
    out = io.BytesIO()
    changed = repo.diff(before, after, out)
    return out.getvalue(), changed, {**before.skipped, **after.skipped}


@pytest.mark.parametrize("git", [True, False], ids=["git", "plain"])
def test_patch_applies_to_a_pristine_copy(tmp_path: Path, git: bool) -> None:
    root, copy, scratch = tmp_path / "ws", tmp_path / "copy", tmp_path / "scratch"
    scratch.mkdir()
    _seed(root)
    if git:
        _git(root, "init", "-q")
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", "seed")
    shutil.copytree(root, copy, symlinks=True)
    with PrivateRepo(scratch) as repo:
        patch, changed, skipped = _diff(repo, root, _change)
    assert changed == ["a.txt", "b.txt", "bin.dat", "link", "new.txt"] and skipped == {}
    assert b".cage-state" not in patch
    (tmp_path / "p.patch").write_bytes(patch)
    subprocess.run(["git", "apply", str(tmp_path / "p.patch")], cwd=copy, check=True)
    assert (copy / "a.txt").read_text() == "one\nTWO\n" and not (copy / "b.txt").exists()
    assert (copy / "new.txt").read_text() == "fresh"
    assert (copy / "bin.dat").read_bytes() == bytes(range(256))
    assert (copy / "link").readlink() == Path("a.txt")
    if git:
        assert _git(root, "status", "--porcelain", "-uno") == " M a.txt\n D b.txt\n"  # index untouched
    assert list(scratch.iterdir()) == []  # the private repository is gone


def test_no_change_gives_an_empty_patch(tmp_path: Path) -> None:
    _seed(tmp_path / "ws")
    with PrivateRepo(tmp_path) as repo:
        patch, changed, _ = _diff(repo, tmp_path / "ws", lambda root: None)
    assert (patch, changed) == (b"", [])


def test_the_checkouts_git_config_never_runs(tmp_path: Path) -> None:
    """C1: fsmonitor, a clean filter, diff.external, textconv and hooks planted in the repository."""
    root, marker = tmp_path / "ws", tmp_path / "ran"
    _seed(root)
    _git(root, "init", "-q")
    (root / ".gitattributes").write_text("* filter=evil diff=evil\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "seed")
    plant = f"touch {marker}; cat"
    for key, value in [
        ("core.fsmonitor", f"touch {marker}; true"),
        ("filter.evil.clean", plant),
        ("filter.evil.process", plant),
        ("diff.external", f"sh -c 'touch {marker}'"),
        ("diff.evil.textconv", plant),
        ("diff.evil.command", plant),
        ("core.hooksPath", str(tmp_path / "hooks")),
    ]:
        _git(root, "config", key, value)
    (tmp_path / "hooks").mkdir()
    for hook in ("post-index-change", "reference-transaction", "pre-auto-gc"):
        (tmp_path / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (tmp_path / "hooks" / hook).chmod(0o755)
    with PrivateRepo(tmp_path) as repo:
        _, changed, _ = _diff(repo, root, _change)
    assert "a.txt" in changed
    assert not marker.exists()


def test_sparse_giants_fifos_and_outward_links_are_not_read(tmp_path: Path) -> None:
    """M10: a 100 GB sparse file costs a stat, a fifo never blocks, a link to a host file is a link."""
    root = tmp_path / "ws"
    _seed(root)
    secret = tmp_path / "host-secret"
    secret.write_text("host secret\n")

    def plant(root: Path) -> None:
        with (root / "giant.bin").open("wb") as fh:
            fh.truncate(100 * 2**30)
        os.mkfifo(root / "pipe")
        (root / "leak").symlink_to(secret)
        (root / "sub").mkdir()
        (root / "sub" / "outside").symlink_to(tmp_path)

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    with PrivateRepo(tmp_path) as repo:
        patch, changed, skipped = _diff(repo, root, plant)
    assert time.monotonic() - start < 20
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 200 * 1024  # KiB: far below 100 GB
    assert "giant.bin" in skipped and str(MAX_FILE_BYTES // 2**20) in skipped["giant.bin"]
    assert "giant.bin" not in changed and "pipe" not in changed
    assert b"host secret" not in patch and str(secret).encode() in patch  # the link, not its target
    assert "sub/outside" in changed


def test_a_file_skipped_after_the_turn_is_not_shown_as_deleted(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _seed(root)

    def grow(root: Path) -> None:
        with (root / "a.txt").open("r+b") as fh:
            fh.truncate(MAX_FILE_BYTES + 1)

    with PrivateRepo(tmp_path) as repo:
        patch, changed, skipped = _diff(repo, root, grow)
    assert changed == [] and patch == b"" and "a.txt" in skipped


def test_a_new_gitignore_cannot_hide_an_edit(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _seed(root)

    def hide(root: Path) -> None:
        (root / "a.txt").write_text("evil\n")
        (root / ".gitignore").write_text("a.txt\n.gitignore\nbuild/\n")
        (root / "build").mkdir()
        (root / "build" / "out.o").write_bytes(b"\0")

    with PrivateRepo(tmp_path) as repo:
        patch, changed, _ = _diff(repo, root, hide)
    assert changed == ["a.txt"] and b"+evil" in patch  # ignored new files stay out, like `git status`
