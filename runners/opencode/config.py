"""The generated `opencode.json`: provider, model, MCP servers, instructions, permissions.

No secret is ever written into the file: the connector key, its extra headers and the MCP
servers' env values and headers go into the exec's environment, and the file refers to them
with opencode's `{env:NAME}` substitution (applied to the config text when opencode loads it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.dsl import ConnectorSpec, ConnectorType, McpServerSpec
from orchestrator.errors import RunnerError
from orchestrator.llm.images import has_vision
from runners.base import TurnRequest, connector_key
from runners.opencode.layout import Layout
from runners.opencode.options import OpencodeOptions

PROVIDER_ID = "cage"
KEY_ENV = "CAGE_OPENCODE_API_KEY"
SCHEMA_URL = "https://opencode.ai/config.json"
_PROVIDER_PACKAGES = {
    ConnectorType.OPENAI: "@ai-sdk/openai-compatible",
    ConnectorType.ANTHROPIC: "@ai-sdk/anthropic",
}
_VERSIONED = re.compile(r"/v\d+[a-z0-9]*$")
PERMISSIONS = {
    "edit": "allow",
    "bash": "allow",
    "webfetch": "allow",
    "external_directory": "allow",
    "doom_loop": "allow",
    "question": "deny",
}
"""Explicit, so a run never depends on opencode's defaults and never stops on an "ask". The
`question` tool is denied: without the asking drive nobody would get its question, and opencode
would wait for an answer until the stall timeout (docs/permissions.md, "Questions")."""
ASK_PERMISSIONS = {
    "*": "ask",
    **{name: "ask" for name in (*PERMISSIONS, "read", "glob", "grep", "list", "task", "websearch", "skill")},
    "todowrite": "allow",
    "question": "allow",
}
"""When Cage decides tool calls (`TurnRequest.ask_permissions`): every tool asks (`*` covers MCP
tools and any tool opencode adds), and the serve driver hands each `permission.asked` to Cage.
The `question` tool is allowed: its question itself goes to the client (`question.asked`);
`todowrite` too: it only updates the to-do list the client sees."""


@dataclass
class _Secrets:
    """Secret values moved out of the file, by the env name the file refers to."""

    env: dict[str, str] = field(default_factory=dict)

    def ref(self, name: str, value: str) -> str:
        self.env[name] = value
        return "{env:" + name + "}"


@dataclass(frozen=True)
class OpencodeConfig:
    """The config text plus the secret env values its `{env:...}` references need."""

    text: str
    secret_env: dict[str, str]
    model_ref: str
    """`<provider>/<model>` as opencode names the model."""


def api_base_url(base_url: str) -> str:
    """The AI SDK wants the versioned API root (`…/v1`); connectors store the bare host."""
    base = base_url.rstrip("/")
    return base if _VERSIONED.search(base) else f"{base}/v1"


def _env_name(*parts: str) -> str:
    return "_".join(re.sub(r"[^A-Za-z0-9]", "_", p).upper() for p in parts)


def _provider(
    connector: ConnectorSpec, model: str, url: str, options: OpencodeOptions, secrets: _Secrets
) -> dict[str, Any]:
    provider_options: dict[str, Any] = {
        "baseURL": api_base_url(url),
        "apiKey": secrets.ref(KEY_ENV, connector_key(connector)),
    }
    if connector.headers:
        provider_options["headers"] = {
            name: secrets.ref(_env_name("CAGE_OPENCODE_HEADER", str(i)), value.get_secret_value())
            for i, (name, value) in enumerate(sorted(connector.headers.items()))
        }
    if connector.timeout is not None:
        provider_options["timeout"] = int(connector.timeout.total_seconds() * 1000)
    thinking = connector.thinking is not None and connector.thinking.type == "enabled"
    model_entry: dict[str, Any] = {
        "name": model,
        "tool_call": True,
        "reasoning": thinking,
        "limit": {"context": options.context_window, "output": connector.max_tokens or 8192},
    }
    if has_vision(connector):
        model_entry["attachment"] = True
        model_entry["modalities"] = {"input": ["text", "image"], "output": ["text"]}
    if connector.temperature is not None:
        model_entry["temperature"] = True
        model_entry["options"] = {"temperature": connector.temperature}
    return {
        "npm": _PROVIDER_PACKAGES[connector.type],
        "name": connector.label or connector.id,
        "options": provider_options,
        "models": {model: model_entry},
    }


def _mcp(server: McpServerSpec, secrets: _Secrets) -> dict[str, Any]:
    if server.transport == "stdio":
        entry: dict[str, Any] = {"type": "local", "command": [server.command, *server.args], "enabled": True}
        if server.env:
            entry["environment"] = {
                name: secrets.ref(_env_name("CAGE_OPENCODE_MCP", server.id, name), value)
                for name, value in sorted(server.env.items())
            }
    else:
        entry = {"type": "remote", "url": server.url, "enabled": True}
        if server.headers:
            entry["headers"] = {
                name: secrets.ref(_env_name("CAGE_OPENCODE_MCP", server.id, "H", str(i)), value)
                for i, (name, value) in enumerate(sorted(server.headers.items()))
            }
    if server.timeout is not None:
        entry["timeout"] = int(server.timeout.total_seconds() * 1000)
    return entry


def mcp_key(server_id: str) -> str:
    """The config key of an MCP server: opencode names its tools `<key>_<tool>`, so the key is
    kept a plain identifier."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", server_id)


def allowlist(servers: Sequence[McpServerSpec], permission: dict[str, str]) -> dict[str, bool]:
    """Enforce each server's tool allowlist (`mcp.servers[].tools`): its other tools are hidden
    from the model (`tools`: `<key>_*` false, each listed tool true) and denied if called anyway
    (`permission`: `<key>_*` deny, each listed tool as any other tool). Later, more specific
    entries win in both maps. Returns the `tools` map (empty: no server narrows its tools)."""
    tools: dict[str, bool] = {}
    base = permission.get("*", "allow")
    for server in servers:
        if not server.tools:
            continue
        key = mcp_key(server.id)
        tools[f"{key}_*"] = False
        permission[f"{key}_*"] = "deny"
        for tool in server.tools:
            name = f"{key}_{mcp_key(tool)}"
            tools[name] = True
            permission[name] = base
    return tools


def mcp_keys(turn: TurnRequest) -> dict[str, str]:
    """Config key -> the MCP server's id (what `mcp:<server>/<tool>` rules name)."""
    return {mcp_key(server.id): server.id for server in turn.mcp_servers}


def build_config(turn: TurnRequest, options: OpencodeOptions, layout: Layout) -> OpencodeConfig:
    """The `opencode.json` for `turn`.

    Raises:
        RunnerError: no connector, or a connector without a model.
    """
    connector = turn.connector
    if connector is None:
        raise RunnerError("opencode", "the assistant has no model connector")
    model = options.model or connector.model
    if not model:
        raise RunnerError("opencode", f"connector {connector.id!r} names no model")
    secrets = _Secrets()
    url = turn.model_url or connector.base_url
    model_ref = f"{PROVIDER_ID}/{model}"
    unknown = sorted(set(turn.role_models) - {"light"})
    if unknown:
        raise RunnerError("opencode", f"opencode has no setting for a {unknown[0]} model")
    light = turn.role_models.get("light")
    provider = _provider(connector, model, url, options, secrets)
    if light and light != model:  # `small_model`: titles and summaries, same provider
        provider["models"][light] = {**provider["models"][model], "name": light}
    config: dict[str, Any] = {
        "$schema": SCHEMA_URL,
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
        "model": model_ref,
        "small_model": f"{PROVIDER_ID}/{light}" if light else model_ref,
        "enabled_providers": [PROVIDER_ID],
        "provider": {PROVIDER_ID: provider},
        "permission": dict(ASK_PERMISSIONS if turn.ask_permissions else PERMISSIONS),
    }
    if turn.system_prompt.strip():
        config["instructions"] = [layout.instructions_file]
    servers: dict[str, Any] = {}
    for server in turn.mcp_servers:
        servers[mcp_key(server.id)] = _mcp(server, secrets)
    if servers:
        config["mcp"] = servers
    hidden = allowlist(turn.mcp_servers, config["permission"])
    if hidden:
        config["tools"] = hidden
    text = json.dumps(config, indent=2, sort_keys=False) + "\n"
    return OpencodeConfig(text=text, secret_env=secrets.env, model_ref=model_ref)
