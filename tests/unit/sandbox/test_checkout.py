"""CI mode mounts: `.git` read-only with a sanitized config, the checkout owner as the agent's user."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.errors import WorkspaceError
from orchestrator.sandbox.checkout import checkout_mounts, checkout_owner, sanitized_config

TOKEN = "ghs_0123456789abcdefSECRET"


def _repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    config = path / ".git" / "config"
    config.write_text(
        config.read_text()
        + f'[remote "origin"]\n\turl = https://x-access-token:{TOKEN}@github.com/o/r.git\n'
        + "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
        + f'[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic {TOKEN}\n'
        + f"[credential]\n\thelper = store --file /tmp/{TOKEN}\n"
        + "[core]\n\tfsmonitor = touch /tmp/pwned\n\thooksPath = /tmp/hooks\n"
        + f"[include]\n\tpath = /tmp/{TOKEN}.inc\n"
        + '[branch "main"]\n\tremote = origin\n\tmerge = refs/heads/main\n'
    )
    return path


def test_the_sanitized_config_keeps_what_reading_needs_and_no_secret(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    clean = sanitized_config((repo / ".git" / "config").read_bytes()).decode()
    assert TOKEN not in clean and "extraheader" not in clean and "fsmonitor" not in clean
    assert "hookspath" not in clean.lower() and "credential" not in clean and "include" not in clean
    assert 'url = "https://github.com/o/r.git"' in clean and 'merge = "refs/heads/main"' in clean
    assert "repositoryformatversion" in clean
    (tmp_path / "clean").write_text(clean)  # and git reads it back
    done = subprocess.run(
        ["git", "config", "--file", str(tmp_path / "clean"), "remote.origin.url"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "https://github.com/o/r.git"


def test_git_is_mounted_read_only_with_the_config_covered(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    (repo / ".git" / "modules" / "sub").mkdir(parents=True)
    (repo / ".git" / "modules" / "sub" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / ".git" / "modules" / "sub" / "config").write_text(f"[http]\n\textraheader = {TOKEN}\n")
    mounts = checkout_mounts(repo, "/workspace", read_only=False, scratch=tmp_path / "data")
    by_target = {m.target: m for m in mounts}
    assert by_target["/workspace"].source == str(repo) and not by_target["/workspace"].read_only
    assert (
        by_target["/workspace/.git"].source == str(repo / ".git") and by_target["/workspace/.git"].read_only
    )
    for target in ("/workspace/.git/config", "/workspace/.git/modules/sub/config"):
        source = Path(by_target[target].source)
        assert by_target[target].read_only and tmp_path / "data" in source.parents
        assert TOKEN not in source.read_text()


def test_a_plain_directory_is_one_mount_and_a_symlinked_git_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert [m.target for m in checkout_mounts(plain, "/workspace", read_only=True, scratch=tmp_path)] == [
        "/workspace"
    ]
    (plain / ".git").symlink_to("/etc")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        checkout_mounts(plain, "/workspace", read_only=False, scratch=tmp_path)


def test_the_agent_runs_as_the_checkout_owner_never_as_root(tmp_path: Path) -> None:
    owned = tmp_path / "owned"
    owned.mkdir()
    os.chown(owned, 1234, 4321)
    assert checkout_owner(owned) == (1234, 4321)
    rooted = tmp_path / "rooted"
    rooted.mkdir()
    os.chown(rooted, 0, 0)
    with pytest.raises(WorkspaceError, match="owned by root"):
        checkout_owner(rooted)
