"""`cage run` as a CI job: artifacts, exit codes, output formats, host file ownership."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import docker
import pytest

from orchestrator.stream import validate_stream
from tests.integration.runners.conftest import CHECKOUT_UID, App, cage_run, own

pytestmark = pytest.mark.slow


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _repo(path: Path) -> Path:
    path.mkdir()
    (path / "notes.txt").write_text("an old line\nkeep me\n")
    (path / "README.md").write_text("# demo\n")
    _git(path, "init", "-q")
    _git(path, "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    _git(path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    return path


def _leftovers(client: docker.DockerClient, app: App, assistant: str) -> list[str]:
    labels = [f"{k}={v}" for k, v in app.labels.items()] + [f"cage.assistant={assistant}", "cage.owner=local"]
    return [c.name for c in client.containers.list(all=True, filters={"label": labels})]


def test_edit_in_a_git_repo_leaves_a_patch_that_applies(app: App, tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    pristine = tmp_path / "pristine"
    _git(tmp_path, "clone", "-q", str(repo), str(pristine))
    own(repo)
    out = tmp_path / "out"
    assistant = app.assistant("claude", scenario="edit")
    result = cage_run(app, assistant, repo, "fix the notes", extra=["--output-dir", str(out)])
    assert result.code == 0, result.stderr[-2000:]
    assert (repo / "notes.txt").read_text() == "an new line\nkeep me\n"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["exit_code"] == 0
    assert summary["usage"]["output_tokens"] > 0 and summary["runner"] == "claude"
    assert summary["files_changed"] == ["added.txt", "notes.txt"]
    patch = (out / "changes.patch").read_text()
    assert ".cage" not in patch
    subprocess.run(["git", "apply", "--index", str(out / "changes.patch")], cwd=pristine, check=True)
    assert _git(pristine, "diff", "--cached", "--name-only").split() == ["added.txt", "notes.txt"]
    assert (pristine / "notes.txt").read_text() == (repo / "notes.txt").read_text()
    assert (pristine / "added.txt").read_text() == "added\n"
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert validate_stream(events) == []
    assert events == result.events
    # the agent ran as the checkout's owner: every file is theirs, nothing was chowned
    assert {p.stat().st_uid for p in [repo, *repo.rglob("*")]} == {CHECKOUT_UID}
    status = _git(repo, "-c", "safe.directory=*", "status", "--porcelain")
    assert status and "A  added.txt" not in status  # the user's index was not touched: changes unstaged


def test_plain_directory_gets_a_file_level_patch(app: App, tmp_path: Path) -> None:
    ws = tmp_path / "plain"
    ws.mkdir()
    (ws / "notes.txt").write_text("old\n")
    copy = tmp_path / "copy"
    shutil.copytree(ws, copy)
    own(ws)
    out = tmp_path / "out"
    result = cage_run(
        app, app.assistant("claude", scenario="edit"), ws, "go", extra=["--output-dir", str(out)]
    )
    assert result.code == 0, result.stderr[-2000:]
    subprocess.run(
        ["git", "apply", "--unsafe-paths", "--directory", ".", str(out / "changes.patch")],
        cwd=copy,
        check=True,
    )
    assert (copy / "notes.txt").read_text() == "new\n"
    assert (copy / "added.txt").read_text() == "added\n"


def test_bad_assistant_config_exits_2_naming_the_key(app: App, workspace: Path) -> None:
    assistant = app.assistant("claude")
    sandbox = app.root / "assistants/e2e/claude/sandbox.yao"
    data = json.loads(sandbox.read_text())
    data["computer"]["ports"] = [3000, {"port": 3001}]
    sandbox.write_text(json.dumps(data))
    result = cage_run(app, assistant, workspace, "hi")
    assert result.code == 2
    assert "assistants/e2e/claude/sandbox.yao" in result.stderr and "computer.ports[1]" in result.stderr


def test_bad_set_override_exits_2(app: App, workspace: Path) -> None:
    result = cage_run(
        app, app.assistant("claude"), workspace, "hi", extra=["--set", "sandbox.computer.pids=1"]
    )
    assert result.code == 2 and "computer.pids" in result.stderr and "--set" in result.stderr


def test_unknown_assistant_exits_2(app: App, workspace: Path) -> None:
    result = cage_run(app, "no.such", workspace, "hi")
    assert result.code == 2 and "no.such" in result.stderr


def test_model_500_exits_1(app: App, workspace: Path) -> None:
    result = cage_run(app, app.assistant("claude", scenario="e500"), workspace, "hi")
    assert result.code == 1
    assert result.end["status"] == "error"


def test_unreachable_engine_exits_3(app: App, workspace: Path, tmp_path: Path) -> None:
    result = cage_run(
        app,
        app.assistant("claude"),
        workspace,
        "hi",
        env={"CAGE_DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"},
    )
    assert result.code == 3, result.stderr
    assert "engine" in result.stderr.lower()


def test_timeout_exits_124_and_leaves_no_container(
    app: App, workspace: Path, docker_engine: docker.DockerClient
) -> None:
    assistant = app.assistant("claude", scenario="slow-tool")
    result = cage_run(app, assistant, workspace, "go slow", extra=["--timeout", "5s"], timeout=120)
    assert result.code == 124, result.stderr[-2000:]
    assert result.end["status"] == "error" and "timed out" in (result.end.get("error") or "")
    assert _leftovers(docker_engine, app, assistant) == []


def test_sigint_exits_130_and_leaves_no_container(
    app: App, workspace: Path, docker_engine: docker.DockerClient
) -> None:
    assistant = app.assistant("claude", scenario="cancel-me")
    result = cage_run(app, assistant, workspace, "sleep", interrupt_after='"status":"running"')
    assert result.code == 130, result.stderr[-2000:]
    assert result.end["status"] == "cancelled"
    assert validate_stream(result.events) == []
    assert _leftovers(docker_engine, app, assistant) == []


def test_text_output_shows_tools_and_a_summary(app: App, workspace: Path) -> None:
    result = cage_run(app, app.assistant("claude"), workspace, "hello please", output="text")
    assert result.code == 0, result.stderr[-2000:]
    assert "✓ Bash" in result.stdout and "echo hello > hello.txt" in result.stdout
    assert "done" in result.stdout and "tokens in / out" in result.stdout
    assert "[sandbox] ready" in result.stderr


def test_github_output_annotates_errors_and_writes_the_step_summary(
    app: App, workspace: Path, tmp_path: Path
) -> None:
    summary = tmp_path / "step-summary.md"
    result = cage_run(
        app,
        app.assistant("claude", scenario="e500"),
        workspace,
        "hi",
        output="github",
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert result.code == 1
    assert "::error title=cage" in result.stdout
    text = summary.read_text()
    assert "### cage run: e2e.claude" in text and "| status | error |" in text


def test_a_root_owned_checkout_exits_2_and_nothing_is_chowned(app: App, tmp_path: Path) -> None:
    ws = tmp_path / "rooted"
    ws.mkdir()
    (ws / "notes.txt").write_text("x\n")
    result = cage_run(app, app.assistant("claude"), ws, "hi")
    assert result.code == 2, result.stderr[-2000:]
    assert "--workspace" in result.stderr and "owned by root" in result.stderr
    assert {p.stat().st_uid for p in [ws, *ws.rglob("*")]} == {0} and result.events == []


LLM_STACK = {"anthropic", "openai", "mcp", "alembic"}
"""What a runner turn never needs: the model SDKs and MCP (LLM mode, session titles) and Alembic (the
store is at head after the first run)."""


def _imported(stderr: str) -> set[str]:
    """Top-level packages named by `PYTHONPROFILEIMPORTTIME`'s lines on stderr."""
    lines = [line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")]
    return {name.split(".")[0] for name in lines}


def test_a_runner_turn_imports_no_model_sdk_no_mcp_and_no_alembic(app: App, workspace: Path) -> None:
    """Issue 14, target 1: `cage run` of a claude turn loads only what a runner turn uses."""
    assistant = app.assistant("claude")
    first = cage_run(app, assistant, workspace, "hello")
    assert first.code == 0, first.stderr[-2000:]
    again = cage_run(app, assistant, workspace, "hello", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert again.code == 0, again.stderr[-2000:]
    loaded = _imported(again.stderr)
    assert {"orchestrator", "sqlalchemy", "docker"} <= loaded  # the probe saw the run's imports
    assert not loaded & LLM_STACK, sorted(loaded & LLM_STACK)
