"""`OpencodeAdapter.build_exec`: argv per drive, env kill switches, files, resume, options, secrets."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from pydantic import SecretStr

from orchestrator.dsl import ConnectorSpec, ConnectorType, McpServerSpec
from orchestrator.errors import ConfigError, RunnerError
from runners.base import RunnerExec, TurnRequest
from runners.opencode import OpencodeAdapter

KEY = "sk-test-opencode-key-9876543210"
ROOT = "/workspace"


def _turn(**overrides: Any) -> TurnRequest:
    values: dict[str, Any] = {
        "assistant_id": "demo.coder",
        "owner": "alice",
        "session_id": "chat-1",
        "turn_id": "turn-1",
        "prompt": "write hello.txt",
        "system_prompt": "Be careful.",
        "connector": ConnectorSpec(
            id="openai.fake",
            label="fake",
            type=ConnectorType.OPENAI,
            model="gpt-fake",
            base_url="http://model.internal:9000",
            key=SecretStr(KEY),
            timeout=timedelta(seconds=90),
        ),
    }
    values.update(overrides)
    return TurnRequest(**values)


def _exec(**overrides: Any) -> RunnerExec:
    return OpencodeAdapter().build_exec(_turn(**overrides))


def _file(rexec: RunnerExec, suffix: str) -> str:
    (found,) = [f.content for f in rexec.files if f.path.endswith(suffix)]
    return found


def _config(rexec: RunnerExec) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_file(rexec, "opencode/opencode.json"))
    return data


def test_oneshot_uses_opencode_run_with_the_prompt_after_double_dash() -> None:
    rexec = _exec(prompt="-v looks like a flag")
    assert rexec.argv[:4] == ("opencode", "run", "--format", "json")
    assert "--thinking" in rexec.argv and "--session" not in rexec.argv
    assert rexec.argv[-2:] == ("--", "-v looks like a flag")
    assert rexec.argv[rexec.argv.index("--model") + 1] == "cage/gpt-fake"
    assert rexec.stdin is None and not rexec.keep_stdin_open
    assert rexec.user == "sandbox" and rexec.workdir == "/workspace"


def test_run_resumes_the_recorded_session() -> None:
    rexec = _exec(resume={"session_id": "ses_abc"})
    assert rexec.argv[rexec.argv.index("--session") + 1] == "ses_abc"


def test_a_huge_prompt_goes_through_stdin() -> None:
    prompt = "x" * 200_000
    rexec = _exec(prompt=prompt)
    assert rexec.stdin == prompt.encode() and prompt not in rexec.argv and "--" not in rexec.argv


@pytest.mark.parametrize("lifecycle", ["session", "longrunning", "persistent"])
def test_long_lived_boxes_use_the_serve_driver(lifecycle: str) -> None:
    rexec = _exec(lifecycle=lifecycle, resume={"session_id": "ses_x"})
    assert rexec.argv[:2] == ("python3", "/workspace/.cage-state/runner/opencode/serve_driver.py")
    assert rexec.argv[rexec.argv.index("--session") + 1] == "ses_x"
    assert rexec.argv[rexec.argv.index("--port") + 1] == "4096"
    assert rexec.stdin == b"write hello.txt" and "write hello.txt" not in rexec.argv
    driver = [f for f in rexec.files if f.path.endswith("serve_driver.py")]
    assert driver and driver[0].mode == 0o755 and "prompt_async" in driver[0].content


def test_drive_option_overrides_the_lifecycle() -> None:
    assert _exec(lifecycle="session", options={"drive": "run"}).argv[1] == "run"
    assert _exec(options={"drive": "serve", "serve_port": 5001}).argv[0] == "python3"


def test_env_has_every_kill_switch_and_workspace_dirs() -> None:
    env = _exec().env
    for name in (
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_LSP_DOWNLOAD",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS",
        "OPENCODE_DISABLE_SHARE",
        "OPENCODE_DISABLE_CLAUDE_CODE",
    ):
        assert env[name] == "1"
    assert env["HOME"] == "/workspace/.cage-state/home"
    assert env["XDG_DATA_HOME"] == "/workspace/.cage-state/home/.local/share"
    assert env["XDG_CONFIG_HOME"] == "/workspace/.cage-state/home/.config"
    assert env["OPENCODE_CONFIG"] == "/workspace/.cage-state/runner/opencode/opencode.json"


def test_assistant_environment_cannot_override_cage_values() -> None:
    env = _exec(environment={"HOME": "/root", "FOO": "bar", "OPENCODE_DISABLE_SHARE": "0"}).env
    assert env["HOME"] == "/workspace/.cage-state/home" and env["FOO"] == "bar"
    assert env["OPENCODE_DISABLE_SHARE"] == "1"


def test_files_are_relative_and_stop_the_plugin_install() -> None:
    rexec = _exec()
    paths = {f.path for f in rexec.files}
    assert all(not p.startswith("/") for p in paths)
    assert ".cage-state/home/.config/opencode/node_modules/.cage-keep" in paths
    lock = json.loads(_file(rexec, "opencode/package-lock.json"))
    assert "@opencode-ai/plugin" in lock["packages"][""]["dependencies"]
    assert _file(rexec, "instructions.md") == "Be careful."


def test_config_maps_an_openai_connector() -> None:
    config = _config(_exec())
    assert config["autoupdate"] is False and config["share"] == "disabled"
    assert config["model"] == "cage/gpt-fake"
    provider = config["provider"]["cage"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"]["baseURL"] == "http://model.internal:9000/v1"
    assert provider["options"]["apiKey"] == "{env:CAGE_OPENCODE_API_KEY}"
    assert provider["options"]["timeout"] == 90_000
    assert config["permission"] == {
        "edit": "allow",
        "bash": "allow",
        "webfetch": "allow",
        "external_directory": "allow",
        "doom_loop": "allow",
        "question": "deny",  # nobody would answer it without the asking drive
    }
    assert config["instructions"] == ["/workspace/.cage-state/runner/opencode/instructions.md"]


def test_config_maps_an_anthropic_connector_and_the_model_url() -> None:
    connector = ConnectorSpec(
        id="claude",
        label="claude",
        type=ConnectorType.ANTHROPIC,
        model="claude-x",
        base_url="https://api.anthropic.com",
        key=SecretStr(KEY),
    )
    config = _config(_exec(connector=connector, model_url="http://host.docker.internal:7000/v1"))
    provider = config["provider"]["cage"]
    assert provider["npm"] == "@ai-sdk/anthropic"
    assert provider["options"]["baseURL"] == "http://host.docker.internal:7000/v1"


def test_mcp_servers_become_local_and_remote_entries_with_env_references() -> None:
    servers = (
        McpServerSpec(
            id="tools.echo",
            transport="stdio",
            command="python3",
            args=("echo.py",),
            env={"TOKEN": "t-123456789"},
        ),
        McpServerSpec(
            id="web",
            transport="http",
            url="http://mcp.internal/mcp",
            headers={"Authorization": "Bearer abcdefgh"},
        ),
    )
    rexec = _exec(mcp_servers=servers)
    mcp = _config(rexec)["mcp"]
    assert mcp["tools_echo"]["type"] == "local" and mcp["tools_echo"]["command"] == ["python3", "echo.py"]
    env_ref = mcp["tools_echo"]["environment"]["TOKEN"]
    assert env_ref.startswith("{env:") and rexec.env[env_ref[5:-1]] == "t-123456789"
    assert mcp["web"] == {
        "type": "remote",
        "url": "http://mcp.internal/mcp",
        "enabled": True,
        "headers": mcp["web"]["headers"],
    }
    assert "abcdefgh" not in json.dumps(mcp)


def test_secrets_only_in_env_and_listed() -> None:
    servers = (McpServerSpec(id="s", transport="stdio", command="x", env={"TOKEN": "t-123456789"}),)
    for lifecycle in ("oneshot", "session"):
        rexec = _exec(mcp_servers=servers, lifecycle=lifecycle)
        assert rexec.env["CAGE_OPENCODE_API_KEY"] == KEY
        assert set(rexec.secret_env) == {"CAGE_OPENCODE_API_KEY", "CAGE_OPENCODE_MCP_S_TOKEN"}
        assert not any(KEY in a or "t-123456789" in a for a in rexec.argv)
        assert not any(KEY in f.content or KEY in f.path for f in rexec.files)
        assert KEY not in repr(rexec)


def test_options_map_to_flags_and_env() -> None:
    rexec = _exec(options={"model": "other", "agent": "plan", "variant": "high", "bash_timeout_ms": 5000})
    assert rexec.argv[rexec.argv.index("--agent") + 1] == "plan"
    assert rexec.argv[rexec.argv.index("--variant") + 1] == "high"
    assert rexec.argv[rexec.argv.index("--model") + 1] == "cage/other"
    assert rexec.env["OPENCODE_EXPERIMENTAL_BASH_DEFAULT_TIMEOUT_MS"] == "5000"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"connector": None}, "no model connector"),
        ({"prompt": "  "}, "prompt is empty"),
        ({"state_dir": "/elsewhere/.cage-state/runner"}, "inside the workspace"),
    ],
)
def test_bad_turns_are_runner_errors(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(RunnerError, match=message):
        _exec(**overrides)


@pytest.mark.parametrize(
    ("options", "key_path"),
    [
        ({"colour": "red"}, "runner.options.colour"),
        ({"serve_port": 80}, "runner.options.serve_port"),
        ({"permission_mode": "acceptEdits"}, "runner.options.permission_mode"),
    ],
)
def test_bad_options_are_config_errors_with_the_key(options: dict[str, Any], key_path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _exec(options=options)
    assert caught.value.key_path == key_path and str(caught.value.file) == "sandbox.yao"


def test_yaos_bypass_permission_mode_is_accepted_and_another_is_refused_with_the_policy_named() -> None:
    assert _exec(options={"permission_mode": "bypassPermissions"}).argv
    with pytest.raises(ConfigError, match=r"set `permissions` in sandbox\.yao"):
        _exec(options={"permission_mode": "default"})


def test_a_custom_mount_moves_every_file() -> None:
    rexec = _exec(home="/srv/ws/.cage-state/home", state_dir="/srv/ws/.cage-state/runner", workdir="/srv/ws")
    assert ".cage-state/runner/opencode/opencode.json" in {f.path for f in rexec.files}
    assert rexec.env["OPENCODE_CONFIG"] == "/srv/ws/.cage-state/runner/opencode/opencode.json"
