"""`cage assistants` and `cage validate`: what the application directory holds, and what is wrong in it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from orchestrator.cli import validation
from orchestrator.cli.appdir import require_app_dir
from orchestrator.cli.listing import JsonOption, print_rows
from orchestrator.dsl import AppLoader, LoadReport
from orchestrator.settings import Settings

app = typer.Typer(
    help="Inspect the assistants of the application directory.", no_args_is_help=False, add_completion=False
)

COLUMNS = ("id", "name", "mode", "runner", "lifecycle", "connector")


def _report(ctx: typer.Context) -> tuple[Path, LoadReport]:
    app_dir = require_app_dir(ctx.obj["app_dir"])
    loader = AppLoader(app_dir, cache_size=Settings(app_dir=app_dir).assistant_cache_size)
    return app_dir, loader.load_all()


def _rows(report: LoadReport) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for a in sorted(report.assistants, key=lambda a: a.id):
        connector = a.connector
        rows.append(
            {
                "id": a.id,
                "name": a.name,
                "mode": a.mode,
                "runner": a.sandbox.runner.name if a.sandbox else None,
                "lifecycle": a.sandbox.lifecycle.value if a.sandbox else None,
                "connector": connector,
                "connector_available": connector is None or connector not in report.connector_errors,
            }
        )
    return rows


def _list(ctx: typer.Context, as_json: bool) -> None:
    app_dir, report = _report(ctx)
    rows = _rows(report)
    if not as_json:
        for row in rows:
            if not row["connector_available"]:
                row["connector"] = f"{row['connector']} (unavailable)"
    title = f"assistants in {app_dir}"
    print_rows(rows, COLUMNS, as_json=as_json, title=title, no_wrap=("id", "mode", "runner"))
    if as_json:
        return
    from rich.console import Console

    console = Console(stderr=True)
    for conn_id, err in sorted(report.connector_errors.items()):
        console.print(f"[yellow]connector {conn_id} unavailable:[/yellow] {err}", highlight=False)
    for err in report.errors:
        console.print(f"[red]error:[/red] {err}", highlight=False)


@app.callback(invoke_without_command=True)
def list_assistants(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List the assistants with their mode (runner / llm / hook), runner and connector."""
    if ctx.invoked_subcommand is None:
        _list(ctx, as_json)


@app.command("list")
def list_command(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List the assistants (the same as `cage assistants`)."""
    _list(ctx, as_json)


def validate(
    ctx: typer.Context, strict: bool = typer.Option(False, "--strict", help=validation.STRICT_HELP)
) -> None:
    """Load every assistant; exit 2 and list every error (file, key path, line) when any is wrong.

    Keys that load but have no effect in Cage are listed as warnings (exit 0; 2 with --strict)."""
    app_dir, report = _report(ctx)
    validation.print_report(app_dir, report, strict=strict)
