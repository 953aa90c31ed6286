"""Operator commands on a running server: `cage ps`, `cage sessions`, `cage logs`, `cage exec`, `cage rm`.

Thin clients of the HTTP API (`orchestrator.client`) with the user's key: no Docker socket, no
database; what the key may see is what they show.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import anyio
import typer

from orchestrator.cli.listing import JsonOption, print_rows
from orchestrator.cli.remote import KeyOption, UrlOption, require_key
from orchestrator.client import CageClient
from orchestrator.client.http import DEFAULT_URL


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def ps(
    all_: Annotated[bool, typer.Option("--all", help="Every owner's sandboxes (admin key).")] = False,
    usage: Annotated[bool, typer.Option("--usage", help="Add memory and process counts.")] = False,
    as_json: JsonOption = False,
    url: UrlOption = DEFAULT_URL,
    key: KeyOption = None,
) -> None:
    """List the sandboxes: name, owner, assistant, lifecycle, status, idle time, age."""

    async def fetch() -> list[dict[str, object]]:
        async with CageClient(url, require_key(key)) as client:
            boxes = await client.sandboxes(all_owners=all_, usage=usage)
        return [b.model_dump(mode="json") for b in boxes]

    rows = anyio.run(fetch)
    if not as_json:
        for row in rows:
            row["idle"] = _age(float(str(row["idle_seconds"])))
            row["age"] = _age(float(str(row["age_seconds"])))
            row["assistant"] = row["assistant_id"]
    columns = ("name", "owner", "assistant", "lifecycle", "status", "idle", "age")
    print_rows(rows, columns, as_json=as_json, no_wrap=("name",))


def sessions(
    owner: Annotated[
        str | None, typer.Option("--owner", help="Another owner's sessions (admin key).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many.")] = 50,
    as_json: JsonOption = False,
    url: UrlOption = DEFAULT_URL,
    key: KeyOption = None,
) -> None:
    """List the sessions, most recently active first."""

    async def fetch() -> list[dict[str, object]]:
        async with CageClient(url, require_key(key)) as client:
            found = await client.sessions(limit=limit, owner=owner)
        return [s.model_dump(mode="json") for s in found]

    rows = anyio.run(fetch)
    if not as_json:
        for row in rows:
            row["assistant"] = row["assistant_id"]
            row["running"] = row.get("running_turn_id") or ""
            row["updated"] = str(row["updated_at"])[:19].replace("T", " ")
    columns = ("id", "assistant", "owner", "last_seq", "running", "updated")
    print_rows(rows, columns, as_json=as_json, no_wrap=("id",))


def logs(
    session: Annotated[str, typer.Argument(help="The session id (`cage sessions`).")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new events.")] = False,
    after: Annotated[int, typer.Option("--after", help="Only events with a higher seq.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the events as JSON lines.")] = False,
    url: UrlOption = DEFAULT_URL,
    key: KeyOption = None,
) -> None:
    """Print a session's events from its durable log; with -f, then the live ones."""
    from rich.console import Console

    from orchestrator.cli.eventview import EventView

    view = EventView(Console(highlight=False))

    async def show() -> None:
        async with CageClient(url, require_key(key)) as client:
            events = (
                client.follow(session, after_seq=after)
                if follow
                else client.history(session, after_seq=after)
            )
            async for event in events:
                if as_json:
                    sys.stdout.write(json.dumps(event, ensure_ascii=False) + "\n")
                    sys.stdout.flush()
                else:
                    view.show(event)

    anyio.run(show)


def exec_(
    sandbox: Annotated[str, typer.Argument(help="The sandbox name (`cage ps`).")],
    command: Annotated[list[str], typer.Argument(help="The command and its arguments, after `--`.")],
    workdir: Annotated[str, typer.Option("--workdir", help="Working directory in the sandbox.")] = "",
    user: Annotated[str, typer.Option("--user", help="User to run as (default: the sandbox user).")] = "",
    seconds: Annotated[
        float | None, typer.Option("--timeout", help="Kill the command after this long.")
    ] = None,
    url: UrlOption = DEFAULT_URL,
    key: KeyOption = None,
) -> None:
    """Run a command in a sandbox (admin key) and exit with its exit code."""

    async def run() -> int:
        async with CageClient(url, require_key(key)) as client:
            result = await client.exec(
                sandbox, list(command), limit_seconds=seconds, workdir=workdir, user=user
            )
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        if result.truncated:
            sys.stderr.write("cage: the output was truncated by the server\n")
        if result.timed_out or result.exit_code is None:
            sys.stderr.write("cage: the command hit its time limit\n")
            return 124
        return result.exit_code

    raise typer.Exit(anyio.run(run))


def rm(
    sandboxes: Annotated[list[str], typer.Argument(help="Sandbox names (`cage ps`).")],
    admin: Annotated[bool, typer.Option("--admin", help="Any owner's sandbox (admin key).")] = False,
    url: UrlOption = DEFAULT_URL,
    key: KeyOption = None,
) -> None:
    """Remove sandboxes (refused while a turn runs in one); their workspace volumes stay."""

    async def remove() -> None:
        async with CageClient(url, require_key(key)) as client:
            for name in sandboxes:
                await client.remove_sandbox(name, admin=admin)
                typer.echo(f"removed {name}")

    anyio.run(remove)
