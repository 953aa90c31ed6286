"""The `config.toml` codex reads from `CODEX_HOME`, generated for every turn.

It holds the model provider (the connector), the kill switches that keep codex offline and quiet
(analytics, plugin marketplace sync, update check, feedback, OpenTelemetry), approvals off with no
codex sandbox inside ours, and the assistant's MCP servers. **No secret is written to it**: the
connector key, its extra headers and the MCP servers' env/header values travel as environment
variables that the file only *names* (`env_key`, `env_http_headers`, `env_vars`), and the agent's
own shell commands do not inherit them (`shell_environment_policy.exclude`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from orchestrator.dsl import ConnectorSpec, McpServerSpec
from orchestrator.errors import RunnerError
from runners.base import TurnRequest, connector_key
from runners.codex.options import CodexOptions, ReasoningEffort
from runners.codex.toml import TomlValue, table, value

PROVIDER_ID = "cage"
KEY_ENV = "CAGE_CODEX_API_KEY"
"""The env var that carries the connector key (named by the provider's `env_key`)."""
HEADER_ENV_PREFIX = "CAGE_CODEX_HEADER_"
DEFAULT_MAX_RETRIES = 2
"""codex's own defaults (4 request + 5 stream retries) take ~25 s on a persistent 5xx."""
RESERVED_ENV = frozenset({"HOME", "CODEX_HOME", "TMPDIR", "PATH", "USER", KEY_ENV})
HOOK_TIMEOUT = 86_400
"""Seconds codex lets the gate hook run: the broker's deadline decides long before."""
_OWN_ENV_PREFIXES = ("CAGE_CODEX_", "CAGE_MCP_")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VERSION_SEGMENT = re.compile(r"^v\d+(beta|alpha)?\d*$")


@dataclass(frozen=True)
class CodexConfig:
    """The rendered file and the environment it refers to."""

    text: str
    secret_env: dict[str, str] = field(default_factory=dict, repr=False)
    """Env vars the config names (key, header values, MCP env); all of them secrets."""


def openai_connector(turn: TurnRequest) -> ConnectorSpec:
    """The turn's connector, checked to be one codex can drive.

    Raises:
        RunnerError: no connector, an `anthropic` one, or an Azure deployment.
    """
    connector = turn.connector
    if connector is None:
        raise RunnerError("codex", "no model connector: codex needs an openai-type connector")
    if connector.type != "openai":
        raise RunnerError(
            "codex",
            f"connector {connector.id!r} is of type {connector.type.value!r}; codex speaks only the "
            "OpenAI Responses API, so it needs an openai-type connector",
        )
    if connector.azure:
        raise RunnerError(
            "codex",
            f"connector {connector.id!r} is an Azure deployment; codex runs need a "
            "plain OpenAI-compatible /v1/responses endpoint",
        )
    return connector


def responses_base_url(url: str) -> str:
    """The provider `base_url`: the model URL with `/v1` appended unless it already ends in a
    version segment (`/v1`, `/v4`, `/v1beta`); codex then POSTs to `{base_url}/responses`."""
    url = url.rstrip("/")
    url = url.removesuffix("/responses").removesuffix("/chat/completions").rstrip("/")
    last = urlsplit(url).path.rsplit("/", 1)[-1]
    return url if _VERSION_SEGMENT.match(last) else f"{url}/v1"


def _effort(connector: ConnectorSpec, options: CodexOptions) -> ReasoningEffort | None:
    if options.reasoning_effort is not None:
        return options.reasoning_effort
    thinking = connector.thinking
    if thinking is None:
        return None
    if thinking.type == "disabled":
        return "none"
    budget = thinking.budget_tokens
    if budget is None:
        return None
    return "low" if budget <= 4096 else "medium" if budget <= 16384 else "high"


def _root(turn: TurnRequest, connector: ConnectorSpec, options: CodexOptions) -> dict[str, TomlValue]:
    entries: dict[str, TomlValue] = {
        "model": options.model or connector.model,
        "model_provider": PROVIDER_ID,
        "approval_policy": "never",
        "sandbox_mode": "danger-full-access",
        "check_for_update_on_startup": False,
    }
    effort = _effort(connector, options)
    if effort is not None:
        entries["model_reasoning_effort"] = effort
    summary = options.reasoning_summary or ("none" if effort == "none" else "auto")
    entries["model_reasoning_summary"] = summary
    if options.web_search is not None:
        entries["web_search"] = options.web_search
    if turn.system_prompt:
        entries["developer_instructions"] = turn.system_prompt
    return entries


def _provider(turn: TurnRequest, connector: ConnectorSpec) -> tuple[dict[str, TomlValue], dict[str, str]]:
    retries = connector.max_retries if connector.max_retries is not None else DEFAULT_MAX_RETRIES
    entries: dict[str, TomlValue] = {
        "name": connector.label or connector.id,
        "base_url": responses_base_url(turn.model_url or connector.base_url),
        "env_key": KEY_ENV,
        "wire_api": "responses",
        "request_max_retries": retries,
        "stream_max_retries": retries,
    }
    if connector.timeout is not None:
        entries["stream_idle_timeout_ms"] = int(connector.timeout.total_seconds() * 1000)
    if connector.organization:
        entries["http_headers"] = {"OpenAI-Organization": connector.organization}
    secrets = {KEY_ENV: connector_key(connector)}
    env_headers: dict[str, TomlValue] = {}
    for index, (name, secret) in enumerate(sorted(connector.headers.items()), start=1):
        env_name = f"{HEADER_ENV_PREFIX}{index}"
        env_headers[name] = env_name
        secrets[env_name] = secret.get_secret_value()
    if env_headers:
        entries["env_http_headers"] = env_headers
    return entries, secrets


def _mcp_server(spec: McpServerSpec, taken: dict[str, str]) -> tuple[dict[str, TomlValue], dict[str, str]]:
    """One `[mcp_servers.<id>]` table; env and header values go to the environment, by name."""
    entries: dict[str, TomlValue] = {}
    secrets: dict[str, str] = {}
    if spec.transport == "stdio":
        entries["command"] = spec.command
        if spec.args:
            entries["args"] = list(spec.args)
        for name, secret in sorted(spec.env.items()):
            if not _ENV_NAME.match(name) or name in RESERVED_ENV or name.startswith(_OWN_ENV_PREFIXES):
                raise RunnerError("codex", f"MCP server {spec.id!r}: env name {name!r} is reserved or bad")
            if taken.get(name, secret) != secret:
                raise RunnerError(
                    "codex", f"MCP server {spec.id!r}: env {name!r} is set to another value by another server"
                )
            secrets[name] = secret
        if secrets:
            entries["env_vars"] = sorted(secrets)
    elif spec.transport == "http":
        entries["url"] = spec.url
        env_headers: dict[str, TomlValue] = {}
        for index, (name, secret) in enumerate(sorted(spec.headers.items()), start=1):
            env_name = f"CAGE_MCP_{re.sub(r'[^A-Za-z0-9]', '_', spec.id).upper()}_HEADER_{index}"
            env_headers[name] = env_name
            secrets[env_name] = secret
        if env_headers:
            entries["env_http_headers"] = env_headers
    else:
        raise RunnerError(
            "codex", f"MCP server {spec.id!r} uses transport {spec.transport!r}; codex has stdio and http"
        )
    if spec.tools:
        entries["enabled_tools"] = list(spec.tools)
    if spec.timeout is not None:
        entries["tool_timeout_sec"] = spec.timeout.total_seconds()
    return entries, secrets


def gate_hook_table(hook_command: str) -> str:
    """The `PreToolUse` hook that holds every tool call for Cage (asking mode only): matcher
    `.*` (shell, `apply_patch`, MCP tools, ...), and a timeout of a day, so the policy's own
    deadline is what ends a wait."""
    return (
        "[[hooks.PreToolUse]]\n"
        'matcher = ".*"\n'
        "[[hooks.PreToolUse.hooks]]\n"
        'type = "command"\n'
        f"command = {value(hook_command)}\n"
        f"timeout = {HOOK_TIMEOUT}\n"
    )


def build_config(turn: TurnRequest, options: CodexOptions, *, hook_command: str | None = None) -> CodexConfig:
    """Render `config.toml` for this turn; with `hook_command`, the gate hook too.

    Raises:
        RunnerError: the connector cannot drive codex, or an MCP server cannot be configured.
    """
    connector = openai_connector(turn)
    provider, secrets = _provider(turn, connector)
    mcp_tables: list[str] = []
    for spec in turn.mcp_servers:
        entries, mcp_secrets = _mcp_server(spec, secrets)
        secrets.update(mcp_secrets)
        mcp_tables.append(table(("mcp_servers", spec.id), entries))
    excluded = ["CAGE_CODEX_*", "CAGE_MCP_*", *sorted(n for n in secrets if not n.startswith("CAGE_"))]
    parts = [
        "# Generated by Cage for each codex turn; edits are overwritten. Holds no secrets.\n",
        table((), _root(turn, connector, options)),
        table(("model_providers", PROVIDER_ID), provider),
        table(("features",), {"plugins": False}),
        table(("analytics",), {"enabled": False}),
        table(("feedback",), {"enabled": False}),
        table(("otel",), {"exporter": "none"}),
        table(("shell_environment_policy",), {"exclude": excluded}),
        *mcp_tables,
    ]
    if hook_command is not None:
        parts.append(gate_hook_table(hook_command))
    return CodexConfig(text="\n".join(parts), secret_env=secrets)
