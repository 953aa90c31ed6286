"""The `cage` command as a new user meets it, through a real subprocess: no traceback for bad usage,
exit 2 with one line and a hint, `--version`, `--json` listings, completion, the app directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli.app import CageGroup
from tests.subprocess_env import subprocess_env

ROOT = Path(__file__).resolve().parents[3]


def cage(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = subprocess_env(strip=("CAGE_", "_CAGE"))
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("args", [(), ("-h",), ("--help",)], ids=["bare", "-h", "--help"])
def test_help_is_printed_without_a_traceback(args: tuple[str, ...]) -> None:
    result = cage(*args)
    assert result.returncode == 0, result.stderr
    assert "Usage: cage" in result.stdout
    for name in CageGroup.lazy_commands:
        assert name in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_version() -> None:
    result = cage("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("cage ")
    assert result.stdout.split()[1][0].isdigit()


@pytest.mark.parametrize(
    ("args", "command", "message"),
    [
        (("run",), "cage run", "Missing argument"),
        (("nosuch",), "cage", "No such command 'nosuch'"),
        (("--bogus",), "cage", "No such option: --bogus"),
        (("keys", "create"), "cage keys create", "Missing option '--name'"),
        (("--log-level", "LOUD", "validate"), "cage", "--log-level LOUD"),
        (("--app", "/nonexistent", "validate"), "cage", "--app /nonexistent: no such directory"),
    ],
)
def test_bad_usage_is_one_line_and_a_hint_with_exit_2(
    args: tuple[str, ...], command: str, message: str
) -> None:
    result = cage(*args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith(f"{command}: ") and message in lines[0]
    assert len(lines) <= 2
    if len(lines) == 2:
        assert lines[1].startswith("hint: ")


def test_a_group_without_its_sub_command_shows_its_help() -> None:
    result = cage("keys")
    assert result.returncode == 2
    assert "create" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize("command", ["validate", "assistants"])
def test_a_directory_that_is_no_app_says_so(tmp_path: Path, command: str) -> None:
    result = cage(command, cwd=tmp_path)
    assert result.returncode == 2
    assert f"{tmp_path} is not a Cage application directory" in result.stderr
    assert "cage init" in result.stderr
    assert "builtin" not in result.stderr  # the user never wrote the built-in assistants


def test_assistants_json_is_one_array_of_every_assistant() -> None:
    result = cage("assistants", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert {"id", "name", "mode", "runner", "lifecycle", "connector"} <= set(rows[0])
    assert "examples.claude" in {row["id"] for row in rows}


def test_keys_from_a_sub_directory_share_the_apps_database(tmp_path: Path) -> None:
    app = tmp_path / "app"
    (app / "assistants" / "nested").mkdir(parents=True)
    (app / "agent.yml").write_text("{}\n")
    created = cage("keys", "create", "--name", "ci", "--owner", "team", cwd=app / "assistants" / "nested")
    assert created.returncode == 0, created.stderr
    assert (app / ".cage" / "cage.db").is_file()  # tied to the app, not to the cwd
    listed = cage("--app", str(app), "keys", "list", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    [key] = json.loads(listed.stdout)
    assert (key["name"], key["owner"], key["role"]) == ("ci", "team", "user")
    assert created.stdout.strip() not in listed.stdout  # the token is shown once, never listed


def test_keys_outside_an_app_directory_refuse_to_guess_a_database(tmp_path: Path) -> None:
    result = cage("keys", "list", cwd=tmp_path)
    assert result.returncode == 2
    assert "CAGE_DATA_DIR" in result.stderr
    assert not (tmp_path / ".cage").exists()


def test_completion_script_and_command_names() -> None:
    script = cage("completion", "bash")
    assert script.returncode == 0
    assert "_CAGE_COMPLETE=complete_bash" in script.stdout
    words = cage(env={"_CAGE_COMPLETE": "complete_bash", "COMP_WORDS": "cage ke", "COMP_CWORD": "1"})
    assert words.returncode == 0
    assert "keys" in words.stdout.split()
    options = cage(
        env={"_CAGE_COMPLETE": "complete_bash", "COMP_WORDS": "cage keys list --", "COMP_CWORD": "3"}
    )
    assert "--json" in options.stdout.split()


@pytest.mark.parametrize("name", sorted(CageGroup.lazy_commands))
def test_root_help_line_is_the_commands_own(name: str) -> None:
    """The one-line help kept in the root (so `--help` imports nothing) matches the command."""
    lazy = CageGroup.lazy_commands[name]
    command = lazy.load(name)
    assert (command.help or "").strip().splitlines()[0] == lazy.help


def test_run_takes_the_old_name_of_its_session_option(tmp_path: Path) -> None:
    """`--chat` is `--session`'s name before 2026-12: accepted, so the run gets as far as the app."""
    for option in ("--session", "--chat"):
        result = cage("--app", str(tmp_path / "none"), "run", "x.y", "hi", option, "s-1")
        assert result.returncode == 2, result.stderr
        assert "no such directory" in result.stderr and "No such option" not in result.stderr
