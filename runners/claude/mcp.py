"""`--mcp-config` for Claude Code from the assistant's MCP servers, with secrets kept in the env.

Claude Code expands `${VAR}` in an MCP config's `args`, `env`, `url` and `headers` (verified on
2.1.197 for `args` and `env`). Every `env` and `headers` value of a server may be a secret, so
the file only names variables (`CAGE_MCP_<n>_<m>`) and their values go into the exec env, listed
as secret. The file on disk therefore never holds a token.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from orchestrator.dsl import McpServerSpec

_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class ClaudeMcpConfig:
    """The config file's JSON text, the env its placeholders need, and permission rules."""

    text: str
    env: dict[str, str] = field(default_factory=dict, repr=False)
    allowed_tools: tuple[str, ...] = ()
    """`mcp__<server>` (every tool) or `mcp__<server>__<tool>` rules for `--allowedTools`."""


def server_name(server: McpServerSpec) -> str:
    """The name Claude Code knows the server by (tools become `mcp__<name>__<tool>`)."""
    return _NAME_OK.sub("_", server.id)


def mcp_config(servers: Sequence[McpServerSpec]) -> ClaudeMcpConfig:
    """Claude Code's `{"mcpServers": {...}}` for `servers`."""
    entries: dict[str, JsonValue] = {}
    env: dict[str, str] = {}
    rules: list[str] = []
    for index, server in enumerate(servers):
        name = server_name(server)
        secrets = _Placeholders(index, env)
        entry: dict[str, JsonValue]
        if server.transport == "stdio":
            entry = {"type": "stdio", "command": server.command, "args": list(server.args)}
            if server.env:
                entry["env"] = {key: secrets.name(value) for key, value in server.env.items()}
        else:
            entry = {"type": server.transport, "url": server.url}
            if server.headers:
                entry["headers"] = {key: secrets.name(value) for key, value in server.headers.items()}
        entries[name] = entry
        if server.tools:
            rules += [f"mcp__{name}__{tool}" for tool in server.tools]
        else:
            rules.append(f"mcp__{name}")
    text = json.dumps({"mcpServers": entries}, indent=2, sort_keys=True) + "\n"
    return ClaudeMcpConfig(text=text, env=env, allowed_tools=tuple(rules))


ALLOWLIST_MESSAGE = "not allowed: this tool is not in the assistant's MCP allowlist (package.yao mcp.servers)"


def allowlist_hooks(servers: Sequence[McpServerSpec]) -> dict[str, JsonValue]:
    """Claude Code settings that enforce each server's tool allowlist (`mcp.servers[].tools`).

    `--allowedTools` only pre-approves, so under `bypassPermissions` a server's other tools stay
    callable; a `PreToolUse` hook runs in every permission mode, and its exit code 2 blocks the
    call (stderr goes to the model). Its matcher is a regex of the server's tools that are not
    listed (a negative lookahead over the listed names). Empty when no server narrows its tools.
    """
    entries: list[JsonValue] = []
    for server in servers:
        if not server.tools:
            continue
        listed = "|".join(re.escape(tool) for tool in server.tools)
        matcher = f"^mcp__{re.escape(server_name(server))}__(?!(?:{listed})$).*$"
        command = f"echo {json.dumps(ALLOWLIST_MESSAGE)} >&2; exit 2"
        entries.append({"matcher": matcher, "hooks": [{"type": "command", "command": command}]})
    return {"hooks": {"PreToolUse": entries}} if entries else {}


def with_allowlist(settings: str, servers: Sequence[McpServerSpec]) -> str:
    """A settings JSON text with the allowlist hooks added (`settings`' own hooks kept)."""
    doc: dict[str, JsonValue] = json.loads(settings)
    hooks = allowlist_hooks(servers)
    if hooks:
        existing = doc.setdefault("hooks", {})
        assert isinstance(existing, dict)
        pre = existing.setdefault("PreToolUse", [])
        assert isinstance(pre, list)
        added = hooks["hooks"]
        assert isinstance(added, dict) and isinstance(added["PreToolUse"], list)
        pre.extend(added["PreToolUse"])
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


class _Placeholders:
    """Hands out `${CAGE_MCP_<server>_<n>}` references and records their values."""

    def __init__(self, server_index: int, env: dict[str, str]) -> None:
        self._prefix = f"CAGE_MCP_{server_index}_"
        self._env = env
        self._count = 0

    def name(self, value: str) -> str:
        variable = f"{self._prefix}{self._count}"
        self._count += 1
        self._env[variable] = value
        return "${" + variable + "}"
