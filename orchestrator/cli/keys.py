"""`cage keys`: create, list and revoke API keys. A new key's token is printed once, never again."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, get_args

import anyio
import typer

from orchestrator.cli.appdir import state_settings
from orchestrator.cli.listing import JsonOption, print_rows
from orchestrator.errors import UsageError
from orchestrator.settings import Settings
from orchestrator.store import KeyInfo, KeyRole, Store

app = typer.Typer(help="Create, list and revoke API keys.", no_args_is_help=True, add_completion=False)


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
    key_id, token = anyio.run(_create, state_settings(), name, roles[role], owner)
    typer.echo(f"created {key_id} ({role}, owner {owner}); the key is shown once:", err=True)
    typer.echo(token)


@app.command("list")
def list_keys(
    all_: Annotated[bool, typer.Option("--all", help="Include revoked keys.")] = False,
    as_json: JsonOption = False,
) -> None:
    """The keys (id, name, prefix, role, owner), never their tokens."""
    rows = [
        {
            "id": k.id,
            "name": k.name,
            "prefix": k.prefix,
            "role": k.role,
            "owner": k.owner,
            "created": k.created_at.strftime("%Y-%m-%d %H:%M") if not as_json else k.created_at.isoformat(),
            "last_used": _when(k.last_used_at, as_json),
            "revoked": k.revoked,
        }
        for k in anyio.run(_list, state_settings(), all_)
    ]
    columns = ("id", "name", "prefix", "role", "owner", "created", "last used", "revoked")
    print_rows(rows, columns, as_json=as_json, no_wrap=("id", "prefix"))


def _when(moment: datetime | None, as_json: bool) -> str | None:
    if moment is None:
        return None
    return moment.isoformat() if as_json else moment.strftime("%Y-%m-%d %H:%M")


@app.command("revoke")
def revoke(key_id: Annotated[str, typer.Argument(help="The key id (`cage keys list`).")]) -> None:
    """Revoke a key for good."""
    info = anyio.run(_revoke, state_settings(), key_id)
    typer.echo(f"revoked {info.id} ({info.name})")
