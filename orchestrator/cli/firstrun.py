"""What `cage serve` says on start: where it listens, how to talk to it, and the first admin key.

On a first start with authentication on, no admin key in the database and no
`CAGE_BOOTSTRAP_ADMIN_KEY`, the server would answer 401 to everything. So it creates one admin key
and hands it over once: printed when a person watches the terminal, otherwise written to
`<data_dir>/first-admin-key` (mode 0600) so that the token never lands in a log collector.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import typer

from orchestrator.cli.appdir import is_app_dir
from orchestrator.settings import Settings

FIRST_KEY_FILE = "first-admin-key"
FIRST_KEY_NAME = "first admin (cage serve)"
FIRST_KEY_OWNER = "admin"


def auth_enabled(settings: Settings) -> bool:
    return settings.auth.strip().lower() not in ("off", "false", "0", "no")


async def _first_admin_key(settings: Settings) -> str | None:
    """A new admin key's token when the database holds no admin key yet, else None."""
    from orchestrator.store import Store

    async with Store.from_settings(settings) as store:
        await store.migrate()
        if any(k.role == "admin" for k in await store.keys.list()):
            return None
        _, token = await store.keys.create_key(FIRST_KEY_NAME, "admin", FIRST_KEY_OWNER)
        return token


def _hand_over(token: str, settings: Settings, *, interactive: bool) -> list[str]:
    if interactive:
        return ["created the first admin key; it is shown this once:", f"    {token}"]
    path = settings.data_dir / FIRST_KEY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    return [f"created the first admin key in {path} (mode 0600): read it, then delete the file"]


def first_contact(settings: Settings, *, interactive: bool | None = None) -> None:
    """Create the first admin key if needed and print how to reach the server (to stderr)."""
    tty = sys.stderr.isatty() if interactive is None else interactive
    url = f"http://{_display_host(settings.host)}:{settings.port}"
    lines = [
        f"serving {settings.app_dir} on {url} (session viewer: {url}/ui/, API docs: {url}/docs)",
        f"data in {settings.data_dir}",
    ]
    if not is_app_dir(settings.app_dir):
        lines.append(
            f"{settings.app_dir} holds no agent.yml, assistants/ or connectors/: only assistants "
            "created over the API will run (`cage init DIR` scaffolds an app)"
        )
    if not auth_enabled(settings):
        lines.append("authentication is OFF (CAGE_AUTH=off): any caller is an admin")
    elif settings.bootstrap_admin_key:
        lines.append("the bootstrap admin key (CAGE_BOOTSTRAP_ADMIN_KEY) works until an admin key exists")
    else:
        token = anyio.run(_first_admin_key, settings)
        if token is not None:
            lines += _hand_over(token, settings, interactive=tty)
        app = _shell_path(settings.app_dir)
        lines.append(f"more keys: cage --app {app} keys create --name NAME --owner OWNER [--role admin]")
    lines += [
        "try it:",
        f'    curl -H "Authorization: Bearer $CAGE_KEY" {url}/v1/models',
        f"    curl -N -H \"Authorization: Bearer $CAGE_KEY\" -H 'Content-Type: application/json' "
        f'{url}/v1/chat/completions -d \'{{"model": "ASSISTANT", "stream": true, '
        f'"messages": [{{"role": "user", "content": "hello"}}]}}\'',
    ]
    for line in lines:
        typer.echo(line if line.startswith("    ") else f"cage: {line}", err=True)


def _display_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in host else host)


def _shell_path(path: Path) -> str:
    text = str(path)
    return text if all(c.isalnum() or c in "/._-+" for c in text) else "'" + text.replace("'", "'\\''") + "'"
