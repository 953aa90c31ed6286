"""`CodexAdapter.build_exec`: argv, environment, the generated config.toml, and where secrets go."""

from __future__ import annotations

import signal
import tomllib
from datetime import timedelta
from typing import Any

import pytest
from pydantic import SecretStr

from orchestrator.dsl import ConnectorSpec, McpServerSpec
from orchestrator.dsl.connectors import ConnectorType, ThinkingConfig
from orchestrator.errors import ConfigError, RunnerError
from orchestrator.stream import CountingIds, TurnBuilder
from runners.base import RunnerAdapter, RunnerExec, Translator, TurnRequest
from runners.codex import CodexAdapter
from runners.codex.config import KEY_ENV, responses_base_url
from runners.codex.invocation import PROMPT_ARGV_LIMIT

KEY = "sk-test-secret-value-123456"
FLAGS = ["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--strict-config"]


def connector(**changes: Any) -> ConnectorSpec:
    data: dict[str, Any] = {
        "id": "gpt",
        "label": "GPT",
        "type": ConnectorType.OPENAI,
        "model": "gpt-5.5",
        "base_url": "https://api.example.com",
        "key": SecretStr(KEY),
    }
    return ConnectorSpec.model_validate({**data, **changes})


def turn(**changes: Any) -> TurnRequest:
    data: dict[str, Any] = {
        "assistant_id": "tests.codex",
        "owner": "u1",
        "session_id": "c1",
        "turn_id": "t1",
        "prompt": "Create hello.txt",
        "connector": connector(),
    }
    return TurnRequest.model_validate({**data, **changes})


def build(**changes: Any) -> RunnerExec:
    return CodexAdapter().build_exec(turn(**changes))


def config_text(rexec: RunnerExec) -> str:
    (f,) = [f for f in rexec.files if f.path.endswith("config.toml")]
    return f.content


def config(rexec: RunnerExec) -> dict[str, Any]:
    return tomllib.loads(config_text(rexec))


def test_adapter_identity_and_cancel_policy() -> None:
    adapter = CodexAdapter()
    assert (adapter.name, adapter.image) == ("codex", "codex")
    assert adapter.supports.resume and adapter.supports.thinking and adapter.supports.mcp
    assert adapter.supports.usage and not adapter.supports.text_deltas and not adapter.supports.cost
    assert adapter.cancel.signal == signal.SIGINT and adapter.cancel.stdin_interrupt is None


def test_adapter_satisfies_the_runner_contract() -> None:
    adapter: RunnerAdapter = CodexAdapter()  # checked by mypy --strict as well
    translator: Translator = adapter.translator(TurnBuilder(CountingIds()), turn())
    assert translator.finished is False and translator.resume_state == {}


def test_first_turn_argv_stdin_user_and_workdir() -> None:
    rexec = build(workdir="/workspace/app")
    assert list(rexec.argv) == ["codex", "exec", "-C", "/workspace/app", *FLAGS, "--", "Create hello.txt"]
    assert rexec.stdin is None and not rexec.keep_stdin_open  # /dev/null: codex waits for EOF otherwise
    assert (rexec.user, rexec.workdir) == ("sandbox", "/workspace/app")


def test_later_turn_resumes_the_thread() -> None:
    rexec = build(resume={"thread_id": "01abc", "usage_input_tokens": "10"})
    assert list(rexec.argv) == [
        "codex",
        "exec",
        "-C",
        "/workspace",
        "resume",
        *FLAGS,
        "--",
        "01abc",
        "Create hello.txt",
    ]


def test_a_prompt_starting_with_a_dash_stays_a_prompt() -> None:
    assert build(prompt="-h please").argv[-2:] == ("--", "-h please")


def test_a_huge_prompt_goes_through_stdin() -> None:
    prompt = "x" * (PROMPT_ARGV_LIMIT + 1)
    rexec = build(prompt=prompt)
    assert rexec.argv[-2:] == ("--", "-")
    assert rexec.stdin == prompt.encode() and not rexec.keep_stdin_open


def test_empty_prompt_is_refused() -> None:
    with pytest.raises(RunnerError, match="prompt is empty"):
        build(prompt="  ")


def test_env_homes_and_kill_switch_free_of_secrets_elsewhere() -> None:
    rexec = build(
        home="/workspace/.cage-state/home",
        state_dir="/workspace/.cage-state/runner",
        environment={"HOME": "/root", "FOO": "bar"},
    )
    assert rexec.env["HOME"] == "/workspace/.cage-state/home"
    assert rexec.env["CODEX_HOME"] == "/workspace/.cage-state/home/.codex"
    assert rexec.env["TMPDIR"] == "/workspace/.cage-state/runner/codex/tmp"
    assert rexec.env["FOO"] == "bar"
    assert rexec.env[KEY_ENV] == KEY and rexec.secret_env == (KEY_ENV,)
    assert not any(KEY in a for a in rexec.argv)
    assert not any(KEY in f.content or KEY in f.path for f in rexec.files)
    assert KEY not in repr(rexec)


def test_files_are_workspace_relative() -> None:
    rexec = build()
    by_path = {f.path: f for f in rexec.files}
    assert set(by_path) == {".cage-state/home/.codex/config.toml", ".cage-state/runner/codex/tmp/.keep"}
    assert by_path[".cage-state/home/.codex/config.toml"].mode == 0o600


def test_home_outside_the_workspace_is_refused() -> None:
    with pytest.raises(RunnerError, match="inside /workspace"):
        build(home="/home/sandbox")


def test_config_has_the_provider_and_every_kill_switch() -> None:
    data = config(build(system_prompt='Be "brief".\nAlways 🙂'))
    assert data["model"] == "gpt-5.5" and data["model_provider"] == "cage"
    assert data["approval_policy"] == "never" and data["sandbox_mode"] == "danger-full-access"
    assert data["check_for_update_on_startup"] is False
    assert data["features"] == {"plugins": False}
    assert data["analytics"] == {"enabled": False}
    assert data["feedback"] == {"enabled": False}
    assert data["otel"] == {"exporter": "none"}
    assert data["developer_instructions"] == 'Be "brief".\nAlways 🙂'
    provider = data["model_providers"]["cage"]
    assert provider["base_url"] == "https://api.example.com/v1"
    assert provider["wire_api"] == "responses" and provider["env_key"] == KEY_ENV
    assert provider["request_max_retries"] == provider["stream_max_retries"] == 2
    assert "CAGE_CODEX_*" in data["shell_environment_policy"]["exclude"]


def test_model_url_overrides_the_connector_url() -> None:
    data = config(build(model_url="http://host.docker.internal:9999"))
    assert data["model_providers"]["cage"]["base_url"] == "http://host.docker.internal:9999/v1"


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("https://api.openai.com", "https://api.openai.com/v1"),
        ("https://api.openai.com/", "https://api.openai.com/v1"),
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("https://open.bigmodel.cn/api/paas/v4", "https://open.bigmodel.cn/api/paas/v4"),
        ("https://proxy.local/openai/v1/responses", "https://proxy.local/openai/v1"),
        ("http://gw:8080/llm", "http://gw:8080/llm/v1"),
    ],
)
def test_responses_base_url(url: str, base: str) -> None:
    assert responses_base_url(url) == base


def test_connector_retries_timeout_and_organization() -> None:
    conn = connector(max_retries=0, timeout=timedelta(seconds=90), organization="org-7")
    provider = config(build(connector=conn))["model_providers"]["cage"]
    assert provider["request_max_retries"] == provider["stream_max_retries"] == 0
    assert provider["stream_idle_timeout_ms"] == 90_000
    assert provider["http_headers"] == {"OpenAI-Organization": "org-7"}


def test_connector_headers_travel_as_env_only() -> None:
    rexec = build(connector=connector(headers={"X-Tenant-Token": SecretStr("tenant-secret-42")}))
    provider = config(rexec)["model_providers"]["cage"]
    (env_name,) = provider["env_http_headers"].values()
    assert rexec.env[env_name] == "tenant-secret-42" and env_name in rexec.secret_env
    assert "tenant-secret-42" not in config_text(rexec)


@pytest.mark.parametrize(
    ("thinking", "options", "effort", "summary"),
    [
        (None, {}, None, "auto"),
        (ThinkingConfig(type="disabled"), {}, "none", "none"),
        (ThinkingConfig(type="enabled", budget_tokens=2000), {}, "low", "auto"),
        (ThinkingConfig(type="enabled", budget_tokens=10000), {}, "medium", "auto"),
        (ThinkingConfig(type="enabled", budget_tokens=50000), {}, "high", "auto"),
        (None, {"reasoning_effort": "xhigh", "reasoning_summary": "detailed"}, "xhigh", "detailed"),
    ],
)
def test_reasoning_from_connector_thinking_and_options(
    thinking: ThinkingConfig | None, options: dict[str, str], effort: str | None, summary: str
) -> None:
    data = config(build(connector=connector(thinking=thinking), options=options))
    assert data.get("model_reasoning_effort") == effort
    assert data["model_reasoning_summary"] == summary


def test_options_override_model_and_web_search() -> None:
    data = config(build(options={"model": "my-model", "web_search": "disabled"}))
    assert data["model"] == "my-model" and data["web_search"] == "disabled"


@pytest.mark.parametrize(
    ("options", "message"),
    [({"max_turns": 3}, "runner.options.max_turns"), ({"reasoning_effort": "huge"}, "reasoning_effort")],
)
def test_bad_options_name_the_key(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        build(options=options)
    assert str(caught.value.file) == "sandbox.yao"


def test_anthropic_connector_is_refused_by_name() -> None:
    conn = connector(id="claude-main", type=ConnectorType.ANTHROPIC)
    with pytest.raises(RunnerError, match=r"'claude-main'.*openai-type"):
        build(connector=conn)


@pytest.mark.parametrize("conn", [None, connector(azure=True)])
def test_missing_or_azure_connector_is_refused(conn: ConnectorSpec | None) -> None:
    with pytest.raises(RunnerError, match="codex"):
        build(connector=conn)


def test_stdio_mcp_server_env_is_named_not_written() -> None:
    server = McpServerSpec(
        id="orch.tools",
        transport="stdio",
        command="tai",
        args=("mcp", "orch"),
        env={"YAO_TOKEN": "mcp-secret-token-9"},
        tools=("report",),
        timeout=timedelta(seconds=45),
    )
    rexec = build(mcp_servers=(server,))
    text = config_text(rexec)
    assert '[mcp_servers."orch.tools"]' in text
    entry = tomllib.loads(text)["mcp_servers"]["orch.tools"]
    assert entry == {
        "command": "tai",
        "args": ["mcp", "orch"],
        "env_vars": ["YAO_TOKEN"],
        "enabled_tools": ["report"],
        "tool_timeout_sec": 45.0,
    }
    assert "mcp-secret-token-9" not in text
    assert rexec.env["YAO_TOKEN"] == "mcp-secret-token-9" and "YAO_TOKEN" in rexec.secret_env
    assert "YAO_TOKEN" in tomllib.loads(text)["shell_environment_policy"]["exclude"]


def test_http_mcp_server_headers_are_named_not_written() -> None:
    server = McpServerSpec(
        id="web",
        transport="http",
        url="https://mcp.example/mcp",
        headers={"Authorization": "Bearer very-secret-bearer"},
    )
    rexec = build(mcp_servers=(server,))
    entry = config(rexec)["mcp_servers"]["web"]
    assert entry["url"] == "https://mcp.example/mcp"
    (env_name,) = entry["env_http_headers"].values()
    assert rexec.env[env_name] == "Bearer very-secret-bearer" and env_name in rexec.secret_env
    assert "very-secret-bearer" not in config_text(rexec)


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ((McpServerSpec(id="s", transport="sse", url="https://x/sse"),), "transport 'sse'"),
        ((McpServerSpec(id="s", transport="stdio", command="x", env={"HOME": "/"}),), "reserved"),
        (
            (
                McpServerSpec(id="a", transport="stdio", command="x", env={"TOKEN": "one-value"}),
                McpServerSpec(id="b", transport="stdio", command="y", env={"TOKEN": "two-value"}),
            ),
            "another value",
        ),
    ],
)
def test_mcp_servers_codex_cannot_take(servers: tuple[McpServerSpec, ...], message: str) -> None:
    with pytest.raises(RunnerError, match=message):
        build(mcp_servers=servers)
