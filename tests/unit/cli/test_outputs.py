"""`--output-dir`: refused inside the workspace, written without following planted links."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli.hostfs import read_named_file
from orchestrator.cli.outputs import ArtifactDir, refuse_inside
from orchestrator.errors import UsageError


def test_an_output_dir_inside_the_workspace_is_refused_naming_the_flag(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(ws / "sub")
    for inside in (ws, ws / "out", ws / "sub" / "deeper", tmp_path / "alias" / "out"):
        with pytest.raises(UsageError, match="--output-dir"):
            refuse_inside(inside, ws, "--output-dir")
    refuse_inside(tmp_path / "out", ws, "--output-dir")
    refuse_inside(tmp_path / "ws-other", ws, "--output-dir")


def test_a_planted_link_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    (out / "changes.patch").symlink_to(victim)
    artifacts = ArtifactDir(out)
    artifacts.write("changes.patch", b"patch")
    artifacts.write("summary.json", b"{}")
    artifacts.write("summary.json", b"{} again")  # a second run replaces its own file
    artifacts.close()
    assert victim.read_text() == "keep"
    assert not (out / "changes.patch").is_symlink() and (out / "changes.patch").read_bytes() == b"patch"
    assert (out / "summary.json").read_bytes() == b"{} again"


def test_an_output_dir_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="--output-dir"):
        ArtifactDir(tmp_path / "out")


def test_a_prompt_file_in_the_checkout_is_read_without_following_links(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.write_text("host secret")
    (ws / "docs" / "prompt.md").write_text("review this")
    (ws / "link.md").symlink_to(secret)
    (ws / "linked-dir").symlink_to(tmp_path)
    assert read_named_file(ws / "docs" / "prompt.md", ws, limit=100) == b"review this"
    for planted in (ws / "link.md", ws / "linked-dir" / "secret"):
        with pytest.raises(OSError):
            read_named_file(planted, ws, limit=100)
    with pytest.raises(OSError, match="larger"):
        read_named_file(ws / "docs" / "prompt.md", ws, limit=3)
    outside = tmp_path / "prompt.md"  # a file of the job's own, outside the checkout: a link is fine
    outside.symlink_to(secret)
    assert read_named_file(outside, ws, limit=100) == b"host secret"
