"""The environment of a Claude Code exec: home, model connection, retry budget, kill switches."""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.dsl import ConnectorSpec, ConnectorType
from orchestrator.errors import RunnerError
from orchestrator.redaction import is_sensitive_key
from runners.base import connector_key

KILL_SWITCHES: Mapping[str, str] = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
    "CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL": "1",
    "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS": "1",
}
"""Always set (reference/clis.md §2): without them Claude Code resolves api.anthropic.com ten
times even with `ANTHROPIC_BASE_URL` set, and asks the model for a title. Background tasks are off
because a turn ends with its tool runs: a command Claude Code moved to the background (it does so
for slow ones) would be killed by the end-of-turn sweep, its output never reaching the model."""

DEFAULT_MAX_RETRIES = 2
"""Claude Code's own default is 10 retries (about 3 minutes on a persistent 5xx), 401 included."""

KEY_VAR = "ANTHROPIC_API_KEY"
HEADERS_VAR = "ANTHROPIC_CUSTOM_HEADERS"
_MODEL_VARS = (
    "ANTHROPIC_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL",
)
"""One model for everything: the main loop, the `opus`/`sonnet`/`haiku` aliases sub-agents ask
for, and the small/fast model of side tasks; a gateway may serve only the connector's model."""
ROLE_VARS: Mapping[str, tuple[str, ...]] = {
    "light": ("ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL"),
    "heavy": ("ANTHROPIC_DEFAULT_OPUS_MODEL",),
}
"""With role models (`runner.connectors.light`/`heavy`), the aliases map to them instead and
sub-agents keep the alias they ask for (no `CLAUDE_CODE_SUBAGENT_MODEL`): Explore asks `haiku`."""


def check_connector(connector: ConnectorSpec | None) -> None:
    """Claude Code speaks only the Anthropic Messages API.

    Raises:
        RunnerError: the connector is an OpenAI-type one.
    """
    if connector is not None and connector.type != ConnectorType.ANTHROPIC:
        raise RunnerError(
            "claude",
            f"connector {connector.id!r} is of type {connector.type.value!r}; Claude Code needs an "
            "'anthropic' connector (the Anthropic Messages API)",
        )


def claude_env(
    *,
    home: str,
    connector: ConnectorSpec | None,
    model_url: str | None,
    model: str | None,
    extra: Mapping[str, str],
    roles: Mapping[str, str] | None = None,
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The exec env and the names in it whose values are secrets.

    `extra` (sandbox.yao `environment`) comes first, so the kill switches, HOME and the model
    settings always win over it. `roles`: `light`/`heavy` model names (`ROLE_VARS`).

    Raises:
        RunnerError: the connector is an OpenAI-type one, or `roles` holds another role.
    """
    check_connector(connector)
    unknown = sorted(set(roles or {}) - set(ROLE_VARS))
    if unknown:
        raise RunnerError("claude", f"Claude Code has no setting for a {unknown[0]} model")
    env = dict(extra)
    secret = {name for name in extra if is_sensitive_key(name)}
    env.update(KILL_SWITCHES)
    env["HOME"] = home
    url = model_url or (connector.base_url if connector is not None else None)
    if url:
        env["ANTHROPIC_BASE_URL"] = url
    if model:
        env.update(dict.fromkeys(_MODEL_VARS, model))
    for role, role_model in (roles or {}).items():
        env.pop("CLAUDE_CODE_SUBAGENT_MODEL", None)
        env.update(dict.fromkeys(ROLE_VARS[role], role_model))
    if connector is None:
        env.setdefault("CLAUDE_CODE_MAX_RETRIES", str(DEFAULT_MAX_RETRIES))
        return env, tuple(sorted(secret))
    env[KEY_VAR] = connector_key(connector)
    secret.add(KEY_VAR)
    retries = connector.max_retries if connector.max_retries is not None else DEFAULT_MAX_RETRIES
    env["CLAUDE_CODE_MAX_RETRIES"] = str(retries)
    if connector.timeout is not None:
        env["API_TIMEOUT_MS"] = str(int(connector.timeout.total_seconds() * 1000))
    if connector.max_tokens is not None:
        env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(connector.max_tokens)
    if connector.thinking is not None:
        if connector.thinking.type == "disabled":
            env["MAX_THINKING_TOKENS"] = "0"
        elif connector.thinking.budget_tokens is not None:
            env["MAX_THINKING_TOKENS"] = str(connector.thinking.budget_tokens)
    if connector.headers:
        env[HEADERS_VAR] = "\n".join(
            f"{name}: {value.get_secret_value()}" for name, value in connector.headers.items()
        )
        secret.add(HEADERS_VAR)
    return env, tuple(sorted(secret))
