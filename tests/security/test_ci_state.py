"""H3: `cage run`'s own state (database, snapshots) never lives where the agent can reach it.

Before: the SQLite database sat in `./.cage` of the current directory, which in CI is the
checkout, and runner file writes handed that directory to the sandbox user.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.security.ci_rig import *  # noqa: F403 - the fixtures
from tests.security.ci_rig import App, attack, cage_run, own, repo

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_the_database_is_outside_the_workspace_and_untouched_by_the_agent(app: App, tmp_path: Path) -> None:
    ws = own(repo(tmp_path / "ws"))
    state = tmp_path / "state"
    assistant = attack(
        app,
        "find / -xdev -name 'cage.db*' 2>/dev/null | sed 's/^/FOUND /'; "
        "mkdir -p .cage && cp /dev/null .cage/cage.db && echo junk > .cage/cage.db-wal",
    )
    # run from inside the checkout, as a CI job does, with no data dir configured
    result = cage_run(
        app, assistant, ws, "tamper", cwd=ws, env={"CAGE_DATA_DIR": "", "XDG_STATE_HOME": str(state)}
    )
    assert result.code == 0, result.stderr[-2000:]
    assert "FOUND " not in "".join(str(e["props"].get("output")) for e in result.of("execute"))
    db = state / "cage" / "cage.db"
    with sqlite3.connect(db) as conn:  # the real database holds this run's turn
        (count,) = conn.execute("select count(*) from events").fetchone()
    assert count > 0
    assert (ws / ".cage" / "cage.db").stat().st_size == 0  # the agent's file, never opened by the host
    assert not (ws / ".cage-state" / "cage.db").exists()


def test_a_data_dir_inside_the_workspace_is_refused(app: App, tmp_path: Path) -> None:
    ws = own(repo(tmp_path / "ws"))
    result = cage_run(app, attack(app, "echo hi"), ws, "hi", env={"CAGE_DATA_DIR": str(ws / ".cage")})
    assert result.code == 2, result.stderr[-2000:]
    assert "CAGE_DATA_DIR" in result.stderr and "inside the workspace" in result.stderr
    assert not (ws / ".cage").exists()


def test_an_app_dir_the_agent_could_rewrite_is_refused(app: App, tmp_path: Path) -> None:
    """M13: hooks (`src/index.py`) are host Python; an app inside the checkout is the agent's to edit."""
    assistant = attack(app, "echo hi")
    ws = repo(tmp_path / "ws")
    shutil.copytree(app.root, ws / ".cage-app")
    own(ws)
    result = cage_run(app, assistant, ws, "hi", env={"CAGE_APP_DIR": str(ws / ".cage-app")})
    assert result.code == 2, result.stderr[-2000:]
    assert "--app" in result.stderr and "inside the workspace" in result.stderr
    assert result.events == []
