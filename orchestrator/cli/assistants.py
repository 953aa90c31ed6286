"""`cage assistants` and `cage validate`: what the application directory holds, and what is wrong in it."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from orchestrator.cli import validation
from orchestrator.dsl import AppLoader, LoadReport
from orchestrator.settings import Settings

app = typer.Typer(help="Inspect the assistants of the application directory.", no_args_is_help=False)


def _report(ctx: typer.Context) -> tuple[Path, LoadReport]:
    app_dir: Path = ctx.obj["app_dir"]
    loader = AppLoader(app_dir, cache_size=Settings().assistant_cache_size)
    return app_dir, loader.load_all()


def _render(app_dir: Path, report: LoadReport, console: Console) -> None:
    table = Table(title=f"assistants in {app_dir}", title_justify="left")
    for column in ("id", "name", "mode", "runner", "lifecycle", "connector"):
        table.add_column(column, no_wrap=column in ("id", "mode", "runner"))
    for a in sorted(report.assistants, key=lambda a: a.id):
        runner = a.sandbox.runner.name if a.sandbox else "-"
        lifecycle = a.sandbox.lifecycle.value if a.sandbox else "-"
        connector = a.connector or "-"
        if a.connector and a.connector in report.connector_errors:
            connector += " (unavailable)"
        table.add_row(a.id, a.name, a.mode, runner, lifecycle, connector)
    console.print(table)
    for conn_id, err in sorted(report.connector_errors.items()):
        console.print(f"[yellow]connector {conn_id} unavailable:[/yellow] {err}", highlight=False)
    for err in report.errors:
        console.print(f"[red]error:[/red] {err}", highlight=False)


@app.callback(invoke_without_command=True)
def list_assistants(ctx: typer.Context) -> None:
    """List the assistants with their mode (runner / llm / hook), runner and connector."""
    if ctx.invoked_subcommand is not None:
        return
    app_dir, report = _report(ctx)
    _render(app_dir, report, Console())


def validate(
    ctx: typer.Context, strict: bool = typer.Option(False, "--strict", help=validation.STRICT_HELP)
) -> None:
    """Load every assistant; exit 2 and list every error (file, key path, line) when any is wrong.

    Keys that load but have no effect in Cage are listed as warnings (exit 0; 2 with --strict)."""
    app_dir, report = _report(ctx)
    validation.print_report(app_dir, report, strict=strict)
