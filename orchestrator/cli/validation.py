"""`cage validate`: every error of the application directory, then every warning.

Errors (a key Yao does not define, a missing file, a bad value) exit 2. Warnings name keys of
Yao's schema that load but have no effect in Cage; they exit 0 unless `--strict` makes them
errors, so CI can hold an application to what Cage really does.
"""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.dsl import LoadReport

STRICT_HELP = "Treat warnings (keys that have no effect in Cage) as errors."


def print_report(app_dir: Path, report: LoadReport, *, strict: bool) -> None:
    """Print errors and warnings to stderr, the summary to stdout.

    Raises:
        typer.Exit: code 2 when there are errors, or warnings under `strict`.
    """
    for err in report.errors:
        typer.echo(str(err), err=True)
    label = "error" if strict else "warning"
    for note in report.warnings:
        typer.echo(f"{label}: {note}", err=True)
    if report.errors or (strict and report.warnings):
        raise typer.Exit(2)
    warned = f" ({len(report.warnings)} warnings)" if report.warnings else ""
    typer.echo(f"{len(report.assistants)} assistants OK in {app_dir}{warned}")
