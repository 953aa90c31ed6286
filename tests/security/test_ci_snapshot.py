"""M10: the after-turn snapshot is bounded: a sparse 100 GB file, a fifo or a device node the agent
leaves costs a `stat`, and the summary says what was left out of `changes.patch`.

Before: the snapshot read every file into memory (plain directories) or had `git add -A` hash it
(git checkouts): 100 GB of zeros to read, or to hold.
"""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

import pytest

from tests.security.ci_rig import *  # noqa: F403 - the fixtures
from tests.security.ci_rig import App, attack, cage_run, own, repo

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.parametrize("git", [True, False], ids=["git", "plain"])
def test_a_sparse_giant_is_skipped_with_a_note_in_bounded_memory(app: App, tmp_path: Path, git: bool) -> None:
    if git:
        ws = own(repo(tmp_path / "ws"))
    else:
        (tmp_path / "ws").mkdir()
        ws = own(tmp_path / "ws")
    out = tmp_path / "out"
    assistant = attack(app, "truncate -s 100G giant.bin && mkfifo pipe && echo small > small.txt")
    started = time.monotonic()
    result = cage_run(app, assistant, ws, "fill the disk", extra=["--output-dir", str(out)], timeout=120)
    assert result.code == 0, result.stderr[-2000:]
    assert time.monotonic() - started < 90
    assert (ws / "giant.bin").stat().st_size == 100 * 2**30  # it is there, sparse
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest child so far
    assert peak_kib < 1024 * 1024
    summary = json.loads((out / "summary.json").read_text())
    assert summary["files_changed"] == ["small.txt"]
    assert "larger than" in summary["files_skipped"]["giant.bin"]
    assert (out / "changes.patch").stat().st_size < 4096
