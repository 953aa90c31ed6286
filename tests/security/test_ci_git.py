"""C1 / H2: `cage run` never runs the checkout's git configuration on the host, and the agent can
neither rewrite `.git` (config, hooks) nor read the credentials a checkout action left in it.

Before: host git snapshotted the checkout with `safe.directory=*` and the repository's own config,
so an `fsmonitor`, clean filter or `diff.external` the agent (or a hostile `.git`) set ran on the
host; `.git` was writable and readable in the box.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.security.ci_rig import *  # noqa: F403 - the fixtures
from tests.security.ci_rig import App, attack, cage_run, git, own, repo, tool_outputs

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TOKEN = "ghs_CageTestToken0123456789abcdefXYZ"


def _planted(marker: Path) -> list[tuple[str, str]]:
    run = f"touch {marker}"
    return [
        ("core.fsmonitor", f"{run}; true"),
        ("core.hooksPath", str(marker.parent / "hooks")),
        ("filter.evil.clean", f"{run}; cat"),
        ("filter.evil.process", run),
        ("diff.external", f"sh -c '{run}'"),
        ("diff.evil.textconv", f"sh -c '{run}; cat'"),
    ]


def _hooks(marker: Path) -> None:
    hooks = marker.parent / "hooks"
    hooks.mkdir()
    for name in ("post-index-change", "reference-transaction", "pre-commit", "post-checkout"):
        (hooks / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / name).chmod(0o755)


def test_git_config_planted_by_the_agent_never_runs_on_the_host(app: App, tmp_path: Path) -> None:
    ws = own(repo(tmp_path / "ws"))
    config = (ws / ".git" / "config").read_bytes()
    marker = tmp_path / "marker"
    _hooks(marker)
    sets = "; ".join(f"git config {key} {_quote(value)}" for key, value in _planted(marker))
    assistant = attack(
        app,
        f"{sets}; printf '[core]\\n\\tfsmonitor = touch {marker}\\n' >> .git/config; "
        "echo '* filter=evil diff=evil' > .gitattributes; echo edited >> notes.txt",
    )
    out = tmp_path / "out"
    result = cage_run(app, assistant, ws, "plant", extra=["--output-dir", str(out)])
    assert result.code == 0, result.stderr[-2000:]
    assert "Read-only file system" in tool_outputs(result) or "could not lock" in tool_outputs(result)
    assert (ws / ".git" / "config").read_bytes() == config
    assert "+edited" in (out / "changes.patch").read_text()
    assert not marker.exists()


def test_git_config_a_hostile_checkout_brings_never_runs_on_the_host(app: App, tmp_path: Path) -> None:
    """A checkout that arrives with a hostile `.git` (an archive, a cache) before any agent ran."""
    ws = repo(tmp_path / "ws", {"notes.txt": "old\n", ".gitattributes": "* filter=evil diff=evil\n"})
    marker = tmp_path / "marker"
    _hooks(marker)
    for key, value in _planted(marker):
        git(ws, "config", key, value)
    own(ws)
    out = tmp_path / "out"
    result = cage_run(
        app,
        attack(app, "echo new > notes.txt && git status --short"),
        ws,
        "edit",
        extra=["--output-dir", str(out)],
    )
    assert result.code == 0, result.stderr[-2000:]
    assert "+new" in (out / "changes.patch").read_text()
    assert not marker.exists()


def test_hooks_cannot_be_planted(app: App, tmp_path: Path) -> None:
    ws = own(repo(tmp_path / "ws"))
    hooks = ws / ".git" / "hooks"
    before = sorted(p.name for p in hooks.iterdir()) if hooks.exists() else []
    assistant = attack(
        app,
        "mkdir -p .git/hooks; printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/post-checkout; "
        "chmod +x .git/hooks/post-checkout; echo x > .git/hooks/pre-commit; "
        "git config core.hooksPath .githooks; mkdir -p .githooks && echo x > .githooks/pre-commit",
    )
    result = cage_run(app, assistant, ws, "hooks")
    assert result.code == 0, result.stderr[-2000:]
    assert sorted(p.name for p in hooks.iterdir()) == before
    assert "hookspath" not in (ws / ".git" / "config").read_text().lower()


def test_the_token_a_checkout_action_persisted_stays_unreadable(app: App, tmp_path: Path) -> None:
    ws = repo(tmp_path / "ws")
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    git(ws, "config", "http.https://github.com/.extraheader", f"AUTHORIZATION: basic {basic}")
    git(ws, "remote", "add", "origin", f"https://x-access-token:{TOKEN}@github.com/o/r.git")
    own(ws)
    assistant = attack(
        app,
        "cat .git/config; git config --list --show-origin; grep -rs ghs_ .git | head; "
        "cp .git/config leaked-config; git remote -v > leaked-remotes; cat /proc/self/mountinfo | grep git",
    )
    out = tmp_path / "out"
    result = cage_run(app, assistant, ws, "read the token", extra=["--output-dir", str(out)])
    assert result.code == 0, result.stderr[-2000:]
    assert "github.com/o/r.git" in tool_outputs(result)  # git still works: the remote, sans token
    seen = [result.stdout, result.stderr, *(p.read_text() for p in out.iterdir())]
    seen += [p.read_text(errors="replace") for p in ws.rglob("*") if p.is_file() and ".git" not in p.parts]
    for text in seen:
        assert TOKEN not in text and basic not in text


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"
