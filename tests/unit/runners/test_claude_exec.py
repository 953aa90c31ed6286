"""`ClaudeAdapter.build_exec`: argv, env, stdin, files, resume and options, secrets only in env."""

from __future__ import annotations

import json
import signal
import subprocess
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from orchestrator.dsl import ConnectorSpec, McpServerSpec
from orchestrator.dsl.connectors import ThinkingConfig
from orchestrator.errors import ConfigError, RunnerError
from runners.base import RunnerExec, TurnRequest
from runners.claude import (
    INTERRUPT,
    INTERRUPT_REQUEST_ID,
    ClaudeAdapter,
    claude_session_id,
    claude_session_id_for,
)
from runners.claude.session import LAUNCHER

KEY = "sk-ant-unit-test-key-123456"
MCP_TOKEN = "mcp-secret-token-987654"


def _connector(**over: Any) -> ConnectorSpec:
    values: dict[str, Any] = {
        "id": "anthropic-main",
        "label": "Anthropic",
        "type": "anthropic",
        "model": "claude-sonnet-4-5",
        "base_url": "https://api.anthropic.example",
        "key": SecretStr(KEY),
    }
    values.update(over)
    return ConnectorSpec(**values)


def _turn(**over: Any) -> TurnRequest:
    values: dict[str, Any] = {
        "assistant_id": "demo.claude",
        "owner": "alice",
        "session_id": "chat-1",
        "turn_id": "turn-1",
        "prompt": "Create hello.txt",
        "connector": _connector(),
    }
    values.update(over)
    return TurnRequest(**values)


def _flags(spec: RunnerExec) -> list[str]:
    """Claude Code's flags: what follows the launcher's `sh -c SCRIPT NAME SESSION_ID`."""
    assert spec.argv[:3] == ("sh", "-c", LAUNCHER)
    return list(spec.argv[5:])


def _values(flags: list[str], flag: str) -> list[str]:
    """The values of a (possibly variadic) flag: the arguments up to the next flag."""
    if flag not in flags:
        return []
    rest = flags[flags.index(flag) + 1 :]
    out = []
    for item in rest:
        if item.startswith("--"):
            break
        out.append(item)
    return out


def test_stream_json_flags_user_and_workdir() -> None:
    spec = ClaudeAdapter().build_exec(_turn(workdir="/workspace/app"))
    flags = _flags(spec)
    assert flags[:7] == [
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--include-partial-messages",
        "--verbose",
    ]
    assert _values(flags, "--permission-mode") == ["bypassPermissions"]
    assert _values(flags, "--model") == ["claude-sonnet-4-5"]
    assert "--strict-mcp-config" in flags
    assert spec.user == "sandbox" and spec.workdir == "/workspace/app"


def test_stdin_is_one_user_line_on_a_pipe_kept_open() -> None:
    spec = ClaudeAdapter().build_exec(_turn(prompt='say "hi"\nplease'))
    assert spec.keep_stdin_open is True
    assert spec.stdin is not None and spec.stdin.endswith(b"\n") and spec.stdin.count(b"\n") == 1
    assert json.loads(spec.stdin) == {
        "type": "user",
        "message": {"role": "user", "content": 'say "hi"\nplease'},
    }


def test_cancel_policy_is_the_stdin_interrupt_then_sigint() -> None:
    adapter = ClaudeAdapter()
    assert adapter.cancel.signal == signal.SIGINT
    assert adapter.cancel.stdin_interrupt == INTERRUPT
    request = json.loads(INTERRUPT)
    assert request == {
        "type": "control_request",
        "request_id": INTERRUPT_REQUEST_ID,
        "request": {"subtype": "interrupt"},
    }


def test_env_sets_kill_switches_home_model_and_retry_budget() -> None:
    spec = ClaudeAdapter().build_exec(_turn(home="/workspace/.cage-state/home"))
    env = spec.env
    for name in (
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "DISABLE_AUTOUPDATER",
        "DISABLE_TELEMETRY",
        "DISABLE_ERROR_REPORTING",
        "DISABLE_BUG_COMMAND",
        "DISABLE_NON_ESSENTIAL_MODEL_CALLS",
        "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS",
    ):
        assert env[name] == "1"
    assert env["HOME"] == "/workspace/.cage-state/home"
    assert env["ANTHROPIC_BASE_URL"] == "https://api.anthropic.example"
    assert env["ANTHROPIC_API_KEY"] == KEY
    assert env["ANTHROPIC_MODEL"] == "claude-sonnet-4-5"
    assert env["ANTHROPIC_SMALL_FAST_MODEL"] == "claude-sonnet-4-5"
    assert env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == "claude-sonnet-4-5"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "2"
    assert "IS_SANDBOX" not in env  # non-root `sandbox` user: bypassing needs no override
    assert "ANTHROPIC_API_KEY" in spec.secret_env


def test_connector_settings_map_to_claude_variables() -> None:
    connector = _connector(
        max_retries=5,
        timeout=timedelta(seconds=90),
        max_tokens=4096,
        thinking=ThinkingConfig(type="enabled", budget_tokens=2048),
        headers={"X-Tenant": SecretStr("tenant-secret-1")},
    )
    spec = ClaudeAdapter().build_exec(
        _turn(connector=connector, model_url="http://host.docker.internal:9000")
    )
    env = spec.env
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "5"
    assert env["API_TIMEOUT_MS"] == "90000"
    assert env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "4096"
    assert env["MAX_THINKING_TOKENS"] == "2048"
    assert env["ANTHROPIC_BASE_URL"] == "http://host.docker.internal:9000"  # model_url wins
    assert env["ANTHROPIC_CUSTOM_HEADERS"] == "X-Tenant: tenant-secret-1"
    assert "ANTHROPIC_CUSTOM_HEADERS" in spec.secret_env


def test_disabled_thinking_sets_zero_budget() -> None:
    spec = ClaudeAdapter().build_exec(_turn(connector=_connector(thinking=ThinkingConfig(type="disabled"))))
    assert spec.env["MAX_THINKING_TOKENS"] == "0"


def test_openai_connector_is_refused_naming_it() -> None:
    connector = _connector(id="gpt-main", type="openai", model="gpt-5")
    with pytest.raises(RunnerError, match="gpt-main") as caught:
        ClaudeAdapter().build_exec(_turn(connector=connector))
    assert KEY not in str(caught.value)


def test_environment_from_sandbox_yao_cannot_override_kill_switches() -> None:
    extra = {"DISABLE_TELEMETRY": "0", "HOME": "/root", "GITHUB_TOKEN": "ghp-abcdef123456", "LANG": "C"}
    spec = ClaudeAdapter().build_exec(_turn(environment=extra))
    assert spec.env["DISABLE_TELEMETRY"] == "1"
    assert spec.env["HOME"] == "/workspace/.cage-state/home"
    assert spec.env["LANG"] == "C"
    assert "GITHUB_TOKEN" in spec.secret_env


@pytest.mark.parametrize(
    ("options", "flag", "values"),
    [
        ({"permission_mode": "acceptEdits"}, "--permission-mode", ["acceptEdits"]),
        ({"max_turns": 30}, "--max-turns", ["30"]),
        ({"allowed_tools": ["Bash(git log:*)", "Edit"]}, "--allowedTools", ["Bash(git log:*)", "Edit"]),
        ({"allowed_tools": "Read, Grep"}, "--allowedTools", ["Read", "Grep"]),
        ({"disallowed_tools": ["WebFetch"]}, "--disallowedTools", ["WebFetch", "AskUserQuestion"]),
        ({"model": "claude-opus-4-5"}, "--model", ["claude-opus-4-5"]),
    ],
)
def test_options_map_to_flags(options: dict[str, Any], flag: str, values: list[str]) -> None:
    flags = _flags(ClaudeAdapter().build_exec(_turn(options=options)))
    assert _values(flags, flag) == values


@pytest.mark.parametrize(
    ("options", "key_path"),
    [
        ({"permission_mode": "yolo"}, "runner.options.permission_mode"),
        ({"max_turns": 0}, "runner.options.max_turns"),
        ({"sandbox_mode": "x", "max_turns": 3}, "runner.options.sandbox_mode"),
    ],
)
def test_bad_options_are_config_errors_with_the_key(options: dict[str, Any], key_path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ClaudeAdapter().build_exec(_turn(options=options))
    assert caught.value.key_path == key_path


def test_system_prompt_goes_to_a_file_under_the_state_dir() -> None:
    spec = ClaudeAdapter().build_exec(
        _turn(system_prompt="Be brief.", state_dir="/workspace/.cage-state/runner")
    )
    assert _values(_flags(spec), "--append-system-prompt-file") == [
        "/workspace/.cage-state/runner/claude/system-prompt.md"
    ]
    files = {f.path: f for f in spec.files}
    assert files[".cage-state/runner/claude/system-prompt.md"].content == "Be brief."
    assert "Be brief." not in spec.argv


def test_no_system_prompt_no_file() -> None:
    spec = ClaudeAdapter().build_exec(_turn(system_prompt=""))
    assert spec.files == () and "--append-system-prompt-file" not in spec.argv


def test_mcp_config_names_variables_and_keeps_secrets_in_env() -> None:
    servers = (
        McpServerSpec(
            id="orch", transport="stdio", command="python3", args=("mcp.py",), env={"TOKEN": MCP_TOKEN}
        ),
        McpServerSpec(
            id="web.search",
            transport="http",
            url="https://mcp.example/mcp",
            headers={"Authorization": f"Bearer {MCP_TOKEN}"},
            tools=("search",),
        ),
    )
    spec = ClaudeAdapter().build_exec(_turn(mcp_servers=servers))
    flags = _flags(spec)
    assert _values(flags, "--mcp-config") == ["/workspace/.cage-state/runner/claude/mcp.json"]
    assert "--strict-mcp-config" in flags
    # `web.search` narrows its tools: the allowlist hook's settings come too
    allowlist, file = sorted(spec.files, key=lambda f: f.path)
    assert file.path == ".cage-state/runner/claude/mcp.json" and file.mode == 0o600
    assert allowlist.path == ".cage-state/runner/claude/mcp-allowlist.json"
    assert MCP_TOKEN not in file.content + allowlist.content
    config = json.loads(file.content)["mcpServers"]
    assert config["orch"] == {
        "type": "stdio",
        "command": "python3",
        "args": ["mcp.py"],
        "env": {"TOKEN": "${CAGE_MCP_0_0}"},
    }
    assert config["web_search"]["headers"] == {"Authorization": "${CAGE_MCP_1_0}"}
    assert spec.env["CAGE_MCP_0_0"] == MCP_TOKEN
    assert spec.env["CAGE_MCP_1_0"] == f"Bearer {MCP_TOKEN}"
    assert {"CAGE_MCP_0_0", "CAGE_MCP_1_0"} <= set(spec.secret_env)
    assert _values(flags, "--allowedTools") == ["mcp__orch", "mcp__web_search__search"]


def test_secrets_appear_only_in_env() -> None:
    servers = (McpServerSpec(id="orch", transport="stdio", command="x", env={"TOKEN": MCP_TOKEN}),)
    spec = ClaudeAdapter().build_exec(_turn(mcp_servers=servers, system_prompt="hi"))
    visible = json.dumps([list(spec.argv), [f.model_dump() for f in spec.files], repr(spec)])
    assert KEY not in visible and MCP_TOKEN not in visible
    secret_values = {spec.env[name] for name in spec.secret_env}
    assert {KEY, MCP_TOKEN} <= secret_values


def test_state_dir_outside_the_workspace_is_refused() -> None:
    with pytest.raises(RunnerError, match="outside the workspace"):
        ClaudeAdapter().build_exec(_turn(system_prompt="x", state_dir="/tmp/state"))


def test_session_id_is_deterministic_per_assistant_and_session() -> None:
    first = claude_session_id_for("demo.claude", "chat-1")
    assert first == claude_session_id_for("demo.claude", "chat-1")
    assert first != claude_session_id_for("demo.claude", "chat-2")
    assert first != claude_session_id_for("demo.other", "chat-1")
    assert uuid.UUID(first).version == 5
    spec = ClaudeAdapter().build_exec(_turn())
    assert spec.argv[4] == first


def test_session_id_from_resume_state_wins_when_it_is_a_uuid() -> None:
    reported = str(uuid.uuid4())
    assert claude_session_id("a", "c", {"session_id": reported}) == reported
    assert claude_session_id("a", "c", {"session_id": "not-a-uuid"}) == claude_session_id_for("a", "c")
    spec = ClaudeAdapter().build_exec(_turn(resume={"session_id": reported}))
    assert spec.argv[4] == reported


@pytest.mark.parametrize("exists", [False, True])
def test_launcher_picks_session_id_or_resume(tmp_path: Path, exists: bool) -> None:
    """Runs the real launcher script with a stub `claude` that prints its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "claude"
    stub.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    stub.chmod(0o755)
    home = tmp_path / "home"
    sid = claude_session_id_for("demo.claude", "chat-1")
    if exists:
        project = home / ".claude" / "projects" / "-workspace"
        project.mkdir(parents=True)
        (project / f"{sid}.jsonl").write_text("{}\n")
    spec = ClaudeAdapter().build_exec(_turn(options={"allowed_tools": ["Bash(echo a b:*)"]}))
    done = subprocess.run(
        list(spec.argv),
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home)},
        capture_output=True,
        text=True,
        check=True,
    )
    args = done.stdout.splitlines()
    assert args[:2] == (["--resume", sid] if exists else ["--session-id", sid])
    assert args[2:] == _flags(spec)  # flags arrive intact, spaces included
