"""`cage keys`: create, list and revoke API keys. A new key's token is printed once, never again."""

from __future__ import annotations

from typing import Annotated, get_args

import anyio
import typer
from rich.console import Console
from rich.table import Table

from orchestrator.errors import UsageError
from orchestrator.settings import Settings
from orchestrator.store import KeyInfo, KeyRole, Store

app = typer.Typer(help="Create, list and revoke API keys.", no_args_is_help=True)


async def _create(settings: Settings, name: str, role: KeyRole, owner: str) -> tuple[str, str]:
    async with Store.from_settings(settings) as store:
        await store.migrate()
        return await store.keys.create_key(name, role, owner)


async def _list(settings: Settings, include_revoked: bool) -> list[KeyInfo]:
    async with Store.from_settings(settings) as store:
        await store.migrate()
        return await store.keys.list(include_revoked=include_revoked)


async def _revoke(settings: Settings, key_id: str) -> KeyInfo:
    async with Store.from_settings(settings) as store:
        await store.migrate()
        return await store.keys.revoke(key_id)


@app.command("create")
def create(
    name: Annotated[str, typer.Option("--name", help="What the key is for.")],
    role: Annotated[str, typer.Option("--role", help="admin or user.")] = "user",
    owner: Annotated[str, typer.Option("--owner", help="Whose sessions, sandboxes and memory.")] = "",
) -> None:
    """Create a key and print its token (shown this once; only a hash is stored)."""
    roles: dict[str, KeyRole] = {r: r for r in get_args(KeyRole)}
    if role not in roles:
        raise UsageError(f"--role {role!r}: expected admin or user")
    if not owner:
        raise UsageError("--owner is required: the user or team the key acts for")
    key_id, token = anyio.run(_create, Settings(), name, roles[role], owner)
    typer.echo(f"created {key_id} ({role}, owner {owner}); the key is shown once:", err=True)
    typer.echo(token)


@app.command("list")
def list_keys(
    all_: Annotated[bool, typer.Option("--all", help="Include revoked keys.")] = False,
) -> None:
    """The keys (id, name, prefix, role, owner), never their tokens."""
    table = Table("id", "name", "prefix", "role", "owner", "created", "last used", "revoked")
    for k in anyio.run(_list, Settings(), all_):
        last = k.last_used_at.strftime("%Y-%m-%d %H:%M") if k.last_used_at else "-"
        table.add_row(
            k.id,
            k.name,
            k.prefix,
            k.role,
            k.owner,
            k.created_at.strftime("%Y-%m-%d %H:%M"),
            last,
            "yes" if k.revoked else "",
        )
    Console().print(table)


@app.command("revoke")
def revoke(key_id: Annotated[str, typer.Argument(help="The key id (`cage keys list`).")]) -> None:
    """Revoke a key for good."""
    info = anyio.run(_revoke, Settings(), key_id)
    typer.echo(f"revoked {info.id} ({info.name})")
