"""Issue 11 item 10, the honest path: `cage run` by a non-root CI user whose uid is not the image's
sandbox uid edits the checkout, and every file ends up that user's, with no ownership change of the
checkout before or after (the agent runs as the checkout's owner).

Before: the agent always ran as uid 1000; a non-root run needed a checkout writable by uid 1000,
and a root run chowned the whole checkout to 1000 and back.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.model_server import FakeModelServer
from tests.security.ci_rig import *  # noqa: F403 - the fixtures
from tests.security.ci_rig import App, attack, cage_run, git, own, repo

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CI_USER, CI_UID = "cage-ci-user", 1234


@pytest.fixture(scope="session")
def ci_user() -> str:
    """A throwaway non-root user in the docker group (created once; kept for later sessions)."""
    if os.geteuid() != 0:
        pytest.skip("creating the CI user needs root")
    try:
        grp.getgrnam("docker")
    except KeyError:
        pytest.skip("no docker group to put the CI user in")
    try:
        return pwd.getpwuid(CI_UID).pw_name
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "-u",
                str(CI_UID),
                "-U",
                "-M",
                "-d",
                "/nonexistent",
                "-s",
                "/usr/sbin/nologin",
                "-G",
                "docker",
                CI_USER,
            ],
            check=True,
        )
    return CI_USER


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[Path]:
    """A directory the CI user can reach (pytest's tmp_path is root's alone)."""
    base = Path(tempfile.mkdtemp(prefix="cage-ci-user-", dir="/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_a_non_root_ci_user_owns_every_file_and_nothing_was_chowned(
    ci_user: str, shared: Path, model_server: FakeModelServer, test_run_labels: dict[str, str]
) -> None:
    app = App(shared / "app", model_server, test_run_labels, shared / "data")
    assistant = attack(
        app,
        "sed -i s/old/new/ notes.txt && echo added > added.txt && mkdir -p sub "
        "&& echo deep > sub/file.txt && id -u > whoami.txt",
    )
    ws = repo(shared / "ws", {"notes.txt": "an old line\n", "README.md": "# demo\n"})
    for path in (shared / "data", shared / "out"):
        path.mkdir()
    own(shared / "data", CI_UID)
    own(shared / "out", CI_UID)
    pristine = shared / "pristine"
    git(shared, "clone", "-q", str(ws), str(pristine))
    own(ws, CI_UID)
    untouched = {
        p: p.lstat().st_ctime_ns for p in (ws / "README.md", ws / ".git" / "HEAD", ws / ".git" / "config")
    }
    result = cage_run(
        app,
        assistant,
        ws,
        "edit",
        user=ci_user,
        extra=["--output-dir", str(shared / "out")],
        env={"CAGE_DATA_DIR": str(shared / "data")},
    )
    assert result.code == 0, result.stderr[-3000:]
    assert (ws / "notes.txt").read_text() == "an new line\n"
    assert (ws / "whoami.txt").read_text().strip() == str(CI_UID)
    owners = {(p.lstat().st_uid, p.lstat().st_gid) for p in [ws, *ws.rglob("*")]}
    assert owners == {(CI_UID, CI_UID)}  # .cage-state/ (the CLI's home) included
    assert {p: p.lstat().st_ctime_ns for p in untouched} == untouched  # no chown, before or after
    subprocess.run(
        ["git", "apply", "--index", str(shared / "out" / "changes.patch")], cwd=pristine, check=True
    )
    assert (pristine / "sub" / "file.txt").read_text() == "deep\n"
