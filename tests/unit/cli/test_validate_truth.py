"""`cage validate` reports what a turn would refuse (issue 12 item 3): a connector the assistant
drives that cannot be served, egress allowlist entries no turn accepts, ports next to an allowlist.
Each is named with its file, key path and (where the file has one) line, and validate exits 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.subprocess_env import subprocess_env

ROOT = Path(__file__).resolve().parents[3]


def validate(app: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = subprocess_env(strip=("CAGE_", "_CAGE"))
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "--app", str(app), "validate"],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def app_with(tmp_path: Path, computer: dict[str, object]) -> Path:
    app = tmp_path / "app"
    (app / "assistants" / "t" / "x").mkdir(parents=True)
    (app / "connectors").mkdir()
    (app / "agent.yml").write_text("uses:\n  default: keyed\n")
    options = {"model": "claude-sonnet-4-5", "key": "$ENV.CAGE_TEST_KEY_UNSET"}
    (app / "connectors" / "keyed.conn.yao").write_text(
        json.dumps({"label": "k", "type": "anthropic", "options": options})
    )
    (app / "assistants" / "t" / "x" / "package.yao").write_text(
        json.dumps({"name": "x", "connector": "keyed"})
    )
    sandbox = {"version": "2.0", "runner": {"name": "claude"}, "computer": computer}
    (app / "assistants" / "t" / "x" / "sandbox.yao").write_text(json.dumps(sandbox, indent=1))
    return app


def test_an_unusable_connector_is_an_error_of_the_assistant(tmp_path: Path) -> None:
    app = app_with(tmp_path, {})
    refused = validate(app)
    assert refused.returncode == 2, refused.stdout
    assert (
        "assistants/t/x/package.yao: connector: connector 'keyed' cannot be used by a turn" in refused.stderr
    )
    assert "CAGE_TEST_KEY_UNSET is not set" in refused.stderr
    served = validate(app, CAGE_TEST_KEY_UNSET="sk-set")
    assert served.returncode == 0, served.stderr


def test_egress_a_turn_would_refuse_is_named_with_its_line(tmp_path: Path) -> None:
    app = app_with(tmp_path, {"ports": [3000], "network": {"allow": ["169.254.169.254"]}})
    refused = validate(app, CAGE_TEST_KEY_UNSET="sk-set")
    assert refused.returncode == 2
    assert "assistants/t/x/sandbox.yao:" in refused.stderr and "computer.network.allow" in refused.stderr
    assert "link-local" in refused.stderr
    app2 = app_with(tmp_path / "2", {"ports": [3000], "network": {"allow": ["api.example.com"]}})
    refused = validate(app2, CAGE_TEST_KEY_UNSET="sk-set")
    assert refused.returncode == 2 and "computer.ports: cannot publish ports" in refused.stderr


def test_a_bad_native_runner_option_is_named_with_its_line(tmp_path: Path) -> None:
    app = app_with(tmp_path, {})
    sandbox_file = app / "assistants" / "t" / "x" / "sandbox.yao"
    sandbox = {"version": "2.0", "runner": {"name": "yaocode", "options": {"agent_system": 42}}}
    sandbox_file.write_text(json.dumps(sandbox, indent=1))
    refused = validate(app, CAGE_TEST_KEY_UNSET="sk-set")
    assert refused.returncode == 2, refused.stdout
    line = next(
        n for n, text in enumerate(sandbox_file.read_text().splitlines(), 1) if "agent_system" in text
    )
    assert f"assistants/t/x/sandbox.yao:{line}: runner.options.agent_system:" in refused.stderr
    assert "valid string" in refused.stderr
    sandbox["runner"] = {"name": "tai", "options": {"agent_system": "You research; answer in French."}}
    sandbox_file.write_text(json.dumps(sandbox, indent=1))
    accepted = validate(app, CAGE_TEST_KEY_UNSET="sk-set")
    assert accepted.returncode == 0, accepted.stderr


def test_a_cli_runners_unknown_or_bad_option_is_named_with_its_line(tmp_path: Path) -> None:
    """claude, codex and opencode options are checked by validate as their adapters check them at
    the turn: an unknown key (claude used to drop it) or a value the runner cannot honour
    (opencode's permission_mode other than bypassPermissions) is an error with its line."""
    app = app_with(tmp_path, {})
    sandbox_file = app / "assistants" / "t" / "x" / "sandbox.yao"
    cases = [
        ("claude", {"max_turns": 3, "sandbox_mode": "x"}, "sandbox_mode", "unknown key"),
        ("opencode", {"permission_mode": "acceptEdits"}, "permission_mode", "`permissions` in sandbox.yao"),
        ("codex", {"reasoning_effort": "loud"}, "reasoning_effort", "Input should be"),
    ]
    for runner, options, key, message in cases:
        sandbox = {"version": "2.0", "runner": {"name": runner, "options": options}}
        sandbox_file.write_text(json.dumps(sandbox, indent=1))
        refused = validate(app, CAGE_TEST_KEY_UNSET="sk-set")
        assert refused.returncode == 2, (runner, refused.stdout)
        line = next(n for n, text in enumerate(sandbox_file.read_text().splitlines(), 1) if key in text)
        assert f"assistants/t/x/sandbox.yao:{line}: runner.options.{key}:" in refused.stderr, refused.stderr
        assert message in refused.stderr, refused.stderr
    sandbox = {
        "version": "2.0",
        "runner": {"name": "opencode", "options": {"permission_mode": "bypassPermissions"}},
    }
    sandbox_file.write_text(json.dumps(sandbox, indent=1))
    accepted = validate(app, CAGE_TEST_KEY_UNSET="sk-set")
    assert accepted.returncode == 0, accepted.stderr
