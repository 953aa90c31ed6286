"""Workspace snapshots, patches and host ownership for `cage run`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.cli.artifacts import HostOwnership, WorkspaceSnapshot


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


def _change(root: Path) -> None:
    (root / "a.txt").write_text("one\nTWO\n")
    (root / "b.txt").unlink()
    (root / "new.txt").write_text("fresh")  # no trailing newline
    (root / ".cage").mkdir(exist_ok=True)
    (root / ".cage" / "state.json").write_text("{}")


def _seed(root: Path) -> None:
    root.mkdir()
    (root / "a.txt").write_text("one\ntwo\n")
    (root / "b.txt").write_text("bye\n")


@pytest.mark.parametrize("git", [True, False], ids=["git", "plain"])
def test_patch_applies_to_a_pristine_copy(tmp_path: Path, git: bool) -> None:
    root, copy = tmp_path / "ws", tmp_path / "copy"
    _seed(root)
    if git:
        _git(root, "init", "-q")
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", "seed")
    shutil.copytree(root, copy)
    before = WorkspaceSnapshot.take(root)
    _change(root)
    patch, changed = before.diff(WorkspaceSnapshot.take(root))
    assert changed == ["a.txt", "b.txt", "new.txt"]
    assert ".cage" not in patch
    (tmp_path / "p.patch").write_text(patch)
    subprocess.run(["git", "apply", str(tmp_path / "p.patch")], cwd=copy, check=True)
    assert (copy / "a.txt").read_text() == "one\nTWO\n" and not (copy / "b.txt").exists()
    assert (copy / "new.txt").read_text() == "fresh"
    if git:
        assert _git(root, "diff", "--cached", "--name-only") == ""  # the user's index is untouched


def test_no_change_gives_an_empty_patch(tmp_path: Path) -> None:
    _seed(tmp_path / "ws")
    snap = WorkspaceSnapshot.take(tmp_path / "ws")
    assert snap.diff(WorkspaceSnapshot.take(tmp_path / "ws")) == ("", [])


@pytest.mark.skipif(os.geteuid() != 0, reason="ownership lending needs root (CI runs as root)")
def test_ownership_is_lent_then_given_back(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _seed(root)
    os.chown(root / "b.txt", 4242, 4242)
    lend = HostOwnership(root, owner_uid=0, owner_gid=0)
    lend.lend()
    assert (root / "a.txt").stat().st_uid == 1000 and root.stat().st_uid == 1000
    (root / "made.txt").write_text("x")
    os.chown(root / "made.txt", 1000, 1000)  # what the sandbox user would leave behind
    (root / ".cage").mkdir()
    os.chown(root / ".cage", 1000, 1000)
    lend.give_back()
    assert (root / "a.txt").stat().st_uid == 0 and (root / "b.txt").stat().st_uid == 4242
    assert (root / "made.txt").stat().st_uid == 0 and root.stat().st_uid == 0
    assert (root / ".cage").stat().st_uid == 1000  # runner state stays with the sandbox user
