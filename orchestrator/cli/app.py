"""Root of the `cage` command line: global options and sub-command registration."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import click
import typer

from orchestrator.cli import assistants, images, keys, run, schemas, serve
from orchestrator.errors import CageError, ConfigError, EngineUnavailable, SandboxError, UsageError
from orchestrator.logs import configure_logging

app = typer.Typer(
    name="cage",
    help="Cage: coding agents in per-assistant Docker containers, one stream protocol.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(assistants.app, name="assistants")
app.add_typer(images.app, name="images")
app.command("validate")(assistants.validate)
app.command("schemas")(schemas.schemas)
app.command("run")(run.run)
app.add_typer(keys.app, name="keys")
app.command("serve")(serve.serve)

EXIT_CONFIG = 2
EXIT_INFRA = 3


@app.callback()
def _root(
    ctx: typer.Context,
    app_dir: Annotated[
        Path | None, typer.Option("--app", envvar="CAGE_APP_DIR", help="Application directory.")
    ] = None,
    log_level: Annotated[str, typer.Option(envvar="CAGE_LOG_LEVEL", help="Log level.")] = "WARNING",
) -> None:
    configure_logging(log_level)
    ctx.obj = {"app_dir": (app_dir or Path.cwd()).resolve()}


def main() -> None:
    """Entry point: maps Cage errors to documented exit codes (2 config/usage, 3 infrastructure)."""
    try:
        code = app(standalone_mode=False)  # click returns the code of a `typer.Exit` here
        sys.exit(code if isinstance(code, int) else 0)
    except (ConfigError, UsageError) as exc:
        typer.echo(f"cage: {exc}", err=True)
        sys.exit(EXIT_CONFIG)
    except (EngineUnavailable, SandboxError) as exc:
        typer.echo(f"cage: {exc}", err=True)
        sys.exit(EXIT_INFRA)
    except CageError as exc:
        typer.echo(f"cage: {exc}", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_CONFIG)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(130)
    except KeyboardInterrupt:
        sys.exit(130)
