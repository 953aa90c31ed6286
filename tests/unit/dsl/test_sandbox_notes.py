"""`computer.vnc`, `filter`, `runner.mode` and `runner.supports` never load silently: the first three
are warnings with file, line, key path and reason (cage validate prints them, --strict fails), and
`supports` is checked (a runner outside it is an error naming the key)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from orchestrator.dsl import AppLoader
from tests.fakes.assistants import write_assistant

SANDBOX = """{
  "version": "2.0",
  "computer": {
    "vnc": {"enabled": true, "resolution": "1280x720"}
  },
  "runner": {"name": "claude", "mode": "service"},
  "filter": {"kind": "box", "min_cpus": 2}
}
"""


def _app(root: Path) -> Path:
    write_assistant(root, "notes.busy", prompts="- role: system\n  content: hi\n")
    (root / "assistants" / "notes" / "busy" / "sandbox.yao").write_text(SANDBOX)
    quiet = {
        "version": "2.0",
        "computer": {"vnc": False},
        "runner": {"name": "claude", "supports": ["claude"]},
    }
    write_assistant(root, "notes.quiet", prompts="- role: system\n  content: hi\n", sandbox=quiet)
    return root


def test_inert_sandbox_keys_are_warnings_with_line_and_key_path(tmp_path: Path) -> None:
    loader = AppLoader(_app(tmp_path / "app"))
    busy = loader.get("notes.busy")
    found = {(w.key_path, w.line): w.message for w in busy.warnings if w.file.name == "sandbox.yao"}
    assert set(found) == {("computer.vnc", 4), ("runner.mode", 6), ("filter", 7)}
    assert "no desktop or VNC server" in found[("computer.vnc", 4)]
    assert "no pool of nodes" in found[("filter", 7)]
    assert "no service mode" in found[("runner.mode", 6)]
    assert [w for w in loader.get("notes.quiet").warnings if w.file.name == "sandbox.yao"] == []


def test_a_runner_outside_supports_is_refused_by_validate(tmp_path: Path) -> None:
    root = _app(tmp_path / "app")
    bad = {"version": "2.0", "runner": {"name": "claude", "supports": ["codex", "opencode"]}}
    write_assistant(root, "notes.bad", prompts="- role: system\n  content: hi\n", sandbox=bad)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAGE_")}
    run = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "validate", "--strict"],
        env={**env, "CAGE_APP_DIR": str(root), "CAGE_DATA_DIR": str(tmp_path / "data")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    out = run.stdout + run.stderr
    assert "assistants/notes/bad/sandbox.yao:1: runner.supports: runner 'claude' is not among" in out
    assert "computer.vnc: has no effect in Cage" in out  # --strict: the warnings fail it too
    assert "Traceback" not in out
