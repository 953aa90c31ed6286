"""`cage validate`: every error of the application directory, then every warning.

Errors (a key Yao does not define, a missing file, a bad value) exit 2. Warnings name keys of
Yao's schema that load but have no effect in Cage; they exit 0 unless `--strict` makes them
errors, so CI can hold an application to what Cage really does.
"""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.dsl import Assistant, LoadReport, is_system_id
from orchestrator.dsl.diagnostics import flatten, validate
from orchestrator.dsl.option_support import check_options
from orchestrator.dsl.source import read_document
from orchestrator.errors import ConfigError
from runners.claude.options import ClaudeOptions
from runners.codex.options import CodexOptions
from runners.native_loop.options import NativeOptions
from runners.opencode.options import OpencodeOptions
from runners.options import RunnerOptions

OPTIONS: dict[str, type[RunnerOptions]] = {
    "claude": ClaudeOptions,
    "codex": CodexOptions,
    "opencode": OpencodeOptions,
    "yaocode": NativeOptions,
    "tai": NativeOptions,
}
"""Each runner's `runner.options` model: the one its adapter parses at the turn."""

STRICT_HELP = "Treat warnings (keys that have no effect in Cage) as errors."


def print_report(app_dir: Path, report: LoadReport, *, strict: bool) -> None:
    """Print errors and warnings to stderr, the summary to stdout.

    Raises:
        typer.Exit: code 2 when there are errors, or warnings under `strict`.
    """
    errors = [*report.errors, *turn_refusals(app_dir, report)]
    for err in errors:
        typer.echo(str(err), err=True)
    label = "error" if strict else "warning"
    for note in report.warnings:
        typer.echo(f"{label}: {note}", err=True)
    if errors or (strict and report.warnings):
        raise typer.Exit(2)
    warned = f" ({len(report.warnings)} warnings)" if report.warnings else ""
    typer.echo(f"{len(report.assistants)} assistants OK in {app_dir}{warned}")


def turn_refusals(app_dir: Path, report: LoadReport) -> list[ConfigError]:
    """What a turn would refuse although the assistant loads: the connector it drives cannot be
    served (its `$ENV` key is unset, ...). System assistants are left out: they run only when used."""
    refusals: list[ConfigError] = []
    for assistant in report.assistants:
        if is_system_id(assistant.id):
            continue
        spec = assistant.sandbox
        role = spec.runner.connectors.get("default") if spec is not None else None
        conn_id: str | None
        if role is not None:
            conn_id, file, key = role.connector, "sandbox.yao", "runner.connectors.default"
        else:
            conn_id, file, key = assistant.connector, "package.yao", "connector"
        refusals.extend(_option_refusals(app_dir, report, assistant, conn_id))
        refusals.extend(_runner_option_refusals(app_dir, assistant))
        err = report.connector_errors.get(conn_id) if conn_id else None
        if err is None:
            continue
        path = assistant.file(file)
        shown = path.relative_to(app_dir) if path.is_relative_to(app_dir) else path
        message = f"connector {conn_id!r} cannot be used by a turn: {err}"
        refusals.append(ConfigError(message, file=shown, key_path=key))
    return refusals


def _option_refusals(
    app_dir: Path, report: LoadReport, assistant: Assistant, conn_id: str | None
) -> list[ConfigError]:
    """The package `options` and `mcp.options` the assistant's runner (or LLM mode) would refuse,
    with their lines."""
    runner = assistant.sandbox.runner.name if assistant.sandbox is not None else None
    provider = report.connector_types.get(conn_id) if conn_id else None
    path = assistant.file("package.yao")
    shown = path.relative_to(app_dir) if path.is_relative_to(app_dir) else path
    try:
        check_options(assistant.package, read_document(path, shown), runner, provider)
    except ConfigError as exc:
        return flatten(exc)
    return []


def _runner_option_refusals(app_dir: Path, assistant: Assistant) -> list[ConfigError]:
    """The `runner.options` the assistant's runner would refuse at the turn (an unknown key, a bad
    value), with their lines in sandbox.yao."""
    spec = assistant.sandbox
    model = OPTIONS.get(spec.runner.name) if spec is not None else None
    if spec is None or model is None:
        return []
    path = assistant.file("sandbox.yao")
    prefix: tuple[str, ...] = ("runner", "options")
    if not path.is_file():  # the sandbox embedded in package.yao
        path, prefix = assistant.file("package.yao"), ("sandbox", *prefix)
    shown = path.relative_to(app_dir) if path.is_relative_to(app_dir) else path
    try:
        validate(model, dict(spec.runner.options), read_document(path, shown), prefix)
    except ConfigError as exc:
        return flatten(exc)
    return []
