"""H1: no artifact is written through a symlink, whoever planted it.

Before: `--output-dir` inside the workspace (the documented form) was created, chowned to the
sandbox user and written with ordinary opens, so `changes.patch -> /any/host/file` planted by the
pull request or the agent made `cage run` (root in CI) overwrite that file.
"""

from __future__ import annotations

import json
from pathlib import Path

import docker
import pytest

from tests.security.ci_rig import *  # noqa: F403 - the fixtures
from tests.security.ci_rig import App, attack, boxes, cage_run, own, repo

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_an_output_dir_inside_the_workspace_is_refused_before_anything_runs(
    app: App, tmp_path: Path, docker_engine: docker.DockerClient
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    ws = repo(tmp_path / "ws")
    (ws / "cage-artifacts").mkdir()
    for name in ("events.jsonl", "summary.json", "changes.patch"):  # what a pull request can commit
        (ws / "cage-artifacts" / name).symlink_to(victim)
    own(ws)
    result = cage_run(
        app, attack(app, "echo hi"), ws, "hi", extra=["--output-dir", str(ws / "cage-artifacts")]
    )
    assert result.code == 2, result.stderr[-2000:]
    assert "--output-dir" in result.stderr and "inside the workspace" in result.stderr
    assert victim.read_text() == "keep"
    assert result.events == [] and boxes(docker_engine, app) == []  # refused before the turn began


def test_links_planted_by_the_agent_or_left_in_the_output_dir_are_not_followed(
    app: App, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    ws = own(repo(tmp_path / "ws"))
    out = tmp_path / "out"
    out.mkdir()
    for name in ("events.jsonl", "summary.json", "changes.patch"):  # left there by an earlier step
        (out / name).symlink_to(victim)
    assistant = attack(
        app,
        f"for n in events.jsonl summary.json changes.patch; do ln -sf {victim} $n; "
        f"mkdir -p cage-artifacts && ln -sf {victim} cage-artifacts/$n; done; "
        f"ln -sf {out} out; echo edited >> notes.txt",
    )
    result = cage_run(app, assistant, ws, "plant links", extra=["--output-dir", str(out)])
    assert result.code == 0, result.stderr[-2000:]
    assert victim.read_text() == "keep"
    for name in ("events.jsonl", "summary.json", "changes.patch"):
        assert not (out / name).is_symlink() and (out / name).is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and "notes.txt" in summary["files_changed"]
    assert "notes.txt" in (out / "changes.patch").read_text()
