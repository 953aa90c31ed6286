"""Output of the listing commands: a rich table for people, `--json` (one array) for scripts."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import typer

JsonOption = Annotated[bool, typer.Option("--json", help="Print a JSON array instead of a table.")]

Row = Mapping[str, Any]


def print_rows(
    rows: Sequence[Row],
    columns: Sequence[str],
    *,
    as_json: bool,
    title: str | None = None,
    no_wrap: Sequence[str] = (),
) -> None:
    """Print `rows` as a JSON array of objects (every key) or as a table of `columns`.

    A column named `last used` shows the row's `last_used` key.
    """
    if as_json:
        typer.echo(json.dumps(list(rows), indent=2, default=str, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, no_wrap=column in no_wrap)
    for row in rows:
        table.add_row(*(_cell(row.get(column.replace(" ", "_"))) for column in columns))
    Console().print(table)


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else ""
    return str(value)
