"""Which package `options` each runner (and each provider) can honour.

A package's `options` (Yao's request parameters) reach the model in every mode Cage runs: LLM
mode, `yaocode` and `tai` put them on each request (Anthropic: `temperature`, `top_p`, `stop`,
`max_tokens`, and `reasoning_effort` as an extended-thinking budget; OpenAI-compatible: every
typed key), plus any extra provider key as is. The agent CLIs run their own requests, so only
the keys a CLI has a setting for are mapped:

- `claude`: `model` (`--model`), `max_tokens`/`max_completion_tokens`
  (`CLAUDE_CODE_MAX_OUTPUT_TOKENS`);
- `opencode`: `model`, `temperature` (the model's `options`), `max_tokens`/`max_completion_tokens`
  (the model's `limit.output`);
- `codex`: `model`, `reasoning_effort` (`model_reasoning_effort`).

`cli_connector` and `cli_runner_options` put them where each adapter reads them already (the
connector's `model`/`max_tokens`/`temperature`, codex's `runner.options.reasoning_effort`); an
explicit `runner.options` value wins.

Any other key is refused (`cage validate` names file, line, key path and the reason): accepted
and dropped would be a lie. The same holds for `mcp.options`: `max_turn` bounds the native
runners' rounds, `tool_loop` and `max_retries` are LLM mode's, and no CLI takes any of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from orchestrator.dsl.connectors import ConnectorSpec
from orchestrator.dsl.document import Document, KeyPath, format_key_path
from orchestrator.dsl.package import PackageOptions, PackageSpec
from orchestrator.errors import ConfigError, ConfigErrors

NATIVE_RUNNERS = frozenset({"yaocode", "tai"})
"""Runners that build the model requests themselves (like LLM mode)."""
CLI_OPTIONS: dict[str, frozenset[str]] = {
    "claude": frozenset({"model", "max_tokens", "max_completion_tokens"}),
    "opencode": frozenset({"model", "temperature", "max_tokens", "max_completion_tokens"}),
    "codex": frozenset({"model", "reasoning_effort"}),
}
"""The package options each agent CLI has a setting for."""
_CLI_NAMES = {"claude": "Claude Code", "opencode": "opencode", "codex": "the Codex CLI"}
_NOT_ANTHROPIC = frozenset({"seed", "presence_penalty", "frequency_penalty"})


def set_keys(options: PackageOptions) -> tuple[str, ...]:
    """The keys the package sets (typed ones given a value, and every extra key)."""
    typed = [
        k
        for k in PackageOptions.model_fields
        if k in options.model_fields_set and getattr(options, k) is not None
    ]
    return (*typed, *(options.model_extra or {}))


def option_refusals(
    options: PackageOptions, runner: str | None, provider: str | None
) -> Iterator[tuple[str, str]]:
    """(key, reason) for every set key that `runner` (None: LLM mode) with a connector of
    `provider` (None: not known here) cannot honour."""
    for key in set_keys(options):
        reason = _reason(key, runner, provider, extra=key not in PackageOptions.model_fields)
        if reason is not None:
            yield key, reason


def _reason(key: str, runner: str | None, provider: str | None, *, extra: bool) -> str | None:
    if runner is None or runner in NATIVE_RUNNERS:
        if provider == "anthropic" and key in _NOT_ANTHROPIC:
            return f"the Anthropic Messages API has no {key!r} parameter"
        return None
    supported = CLI_OPTIONS.get(runner)
    if supported is None or key in supported:
        return None
    cli = _CLI_NAMES[runner]
    what = "provider keys" if extra else f"{key!r}"
    keys = ", ".join(sorted(supported))
    return (
        f"the {runner} runner cannot apply it: {cli} has no setting for {what} (it supports "
        f"{keys}); use runner yaocode or tai, or LLM mode, to send it"
    )


def mcp_option_refusals(package: PackageSpec, runner: str | None) -> Iterator[tuple[str, str]]:
    """(key, reason) for each `mcp.options` key set that `runner` (None: LLM mode) cannot honour:
    `max_turn` bounds the native runners' rounds; the CLIs run their own tool loops."""
    if runner is None or package.mcp is None:
        return
    options = package.mcp.options
    for key in ("max_turn", "tool_loop", "max_retries"):
        if key not in options.model_fields_set:
            continue
        if runner in NATIVE_RUNNERS:
            if key != "max_turn":
                yield (
                    key,
                    (
                        f"the {runner} runner cannot apply it: {key!r} drives LLM mode's tool loop; "
                        "the native loop feeds every result back and never retries a call itself"
                    ),
                )
        else:
            hint = " (use runner.options.max_turns)" if runner == "claude" and key == "max_turn" else ""
            yield (
                key,
                (
                    f"the {runner} runner cannot apply it: {_CLI_NAMES.get(runner, runner)} runs its own "
                    f"tool loop{hint}"
                ),
            )


def _refusals(
    package: PackageSpec, runner: str | None, provider: str | None
) -> Iterator[tuple[KeyPath, str]]:
    for key, reason in option_refusals(package.options, runner, provider):
        yield ("options", key), reason
    for key, reason in mcp_option_refusals(package, runner):
        yield ("mcp", "options", key), reason


def refuse_options(
    package_file: Path, package: PackageSpec, runner: str | None, provider: str | None
) -> None:
    """At turn time (the provider is known now): the first option that cannot be honoured.

    Raises:
        ConfigError: naming the file and the key path (`options.<key>`, `mcp.options.<key>`).
    """
    for path, reason in _refusals(package, runner, provider):
        raise ConfigError(reason, file=package_file, key_path=format_key_path(path))


def check_options(package: PackageSpec, doc: Document, runner: str | None, provider: str | None) -> None:
    """At load time: every option `runner` cannot honour, located in `package.yao`.

    Raises:
        ConfigError: one refusal (`ConfigErrors` for several), with file, line and key path.
    """
    errors = [
        ConfigError(reason, file=doc.file, key_path=format_key_path(path), line=doc.line_for(path))
        for path, reason in _refusals(package, runner, provider)
    ]
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors)


def cli_connector(connector: ConnectorSpec, options: PackageOptions, runner: str) -> ConnectorSpec:
    """The connector an agent CLI's adapter gets, with the package options it maps set on it."""
    supported = CLI_OPTIONS.get(runner, frozenset())
    update: dict[str, Any] = {}
    if options.model and "model" in supported:
        update["model"] = options.model
    max_tokens = options.max_tokens or options.max_completion_tokens
    if max_tokens and "max_tokens" in supported:
        update["max_tokens"] = max_tokens
    if options.temperature is not None and "temperature" in supported:
        update["temperature"] = options.temperature
    return connector.model_copy(update=update) if update else connector


def cli_runner_options(
    runner_options: Mapping[str, Any], options: PackageOptions, runner: str
) -> dict[str, Any]:
    """`runner.options` with the package options an adapter reads from there (codex's
    `reasoning_effort`); a value `runner.options` sets itself wins."""
    merged = dict(runner_options)
    if runner == "codex" and options.reasoning_effort is not None:
        merged.setdefault("reasoning_effort", options.reasoning_effort)
    return merged
