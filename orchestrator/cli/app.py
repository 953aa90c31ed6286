"""Root of the `cage` command line: global options, lazily loaded sub-commands, exit codes.

Exit codes (`ExitCode`, by the error's kind: `orchestrator/error_table.py`): 0 success, 1 a failed
turn or other Cage error, 2 bad usage, an unknown name or a broken configuration, 3 infrastructure
(engine, sandbox, database, a cap), 130 interrupted. Usage errors print one line and a hint,
never a traceback. This module imports only typer: every sub-command is loaded on use
(`orchestrator/cli/lazy.py`), so `cage --help` starts at the speed of typer itself.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ClassVar, NoReturn, TextIO, cast

import typer

from orchestrator.cli.lazy import LazyCommand, LazyGroup
from orchestrator.error_table import ExitCode, surfaces
from orchestrator.errors import CageError, UsageError

SERVER = "Server and operators"


class CageGroup(LazyGroup):
    """The root group: the sub-commands by module, with their one-line help."""

    lazy_commands: ClassVar[dict[str, LazyCommand]] = {
        "init": LazyCommand(
            "orchestrator.cli.init:init",
            "Create an application directory: agent.yml, a connector and one assistant per mode.",
        ),
        "validate": LazyCommand(
            "orchestrator.cli.assistants:validate",
            "Load every assistant; exit 2 and list every error (file, key path, line) when any is wrong.",
        ),
        "assistants": LazyCommand(
            "orchestrator.cli.assistants:app", "Inspect the assistants of the application directory."
        ),
        "run": LazyCommand(
            "orchestrator.cli.run:run",
            "Run one turn of a sandbox assistant against WORKSPACE (exit codes: see `docs/ci.md`).",
        ),
        "images": LazyCommand(
            "orchestrator.cli.images:app", "Build, push, list and prune the runner images."
        ),
        "schemas": LazyCommand(
            "orchestrator.cli.schemas:schemas",
            "Generate the protocol, sandbox.yao and package.yao JSON Schemas (or check they are current).",
        ),
        "completion": LazyCommand(
            "orchestrator.cli.completion:completion",
            "Print the shell completion script for bash, zsh or fish.",
        ),
        "forkserver": LazyCommand(
            "orchestrator.cli.forkcmd:app",
            "Start, stop or show the fork server that starts `cage run` with Cage already imported.",
        ),
        "serve": LazyCommand(
            "orchestrator.cli.serve:serve",
            "Serve sessions (websocket), OpenAI-compatible chat, native SSE and the admin API.",
            SERVER,
        ),
        "keys": LazyCommand("orchestrator.cli.keys:app", "Create, list and revoke API keys.", SERVER),
        "chat": LazyCommand(
            "orchestrator.cli.chat:chat",
            "Talk to an assistant in the terminal: Ctrl-C interrupts a turn, a second Ctrl-C quits.",
            SERVER,
        ),
        "sessions": LazyCommand(
            "orchestrator.cli.operate:sessions", "List the sessions, most recently active first.", SERVER
        ),
        "logs": LazyCommand(
            "orchestrator.cli.operate:logs",
            "Print a session's events from its durable log; with -f, then the live ones.",
            SERVER,
        ),
        "ps": LazyCommand(
            "orchestrator.cli.operate:ps",
            "List the sandboxes: name, owner, assistant, lifecycle, status, idle time, age.",
            SERVER,
        ),
        "exec": LazyCommand(
            "orchestrator.cli.operate:exec_",
            "Run a command in a sandbox (admin key) and exit with its exit code.",
            SERVER,
        ),
        "rm": LazyCommand(
            "orchestrator.cli.operate:rm",
            "Remove sandboxes (refused while a turn runs in one); their workspace volumes stay.",
            SERVER,
        ),
    }


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"cage {version('cage')}")
        except PackageNotFoundError:
            typer.echo("cage (not installed as a package)")
        raise typer.Exit(0)


app = typer.Typer(
    name="cage",
    cls=CageGroup,
    help="Cage: coding agents in per-assistant Docker containers, one stream protocol.",
    invoke_without_command=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # plain click help for the root: no rich import before a sub-command runs
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root(
    ctx: typer.Context,
    app_dir: Annotated[
        Path | None,
        typer.Option(
            "--app",
            envvar="CAGE_APP_DIR",
            help="Application directory (default: the nearest one from here upwards).",
        ),
    ] = None,
    log_level: Annotated[
        str | None,
        typer.Option(
            "--log-level",
            envvar="CAGE_LOG_LEVEL",
            help="DEBUG, INFO, WARNING or ERROR (default WARNING); applies to every sub-command.",
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_version, help="Print the version and exit."),
    ] = False,
) -> None:
    """Cage: coding agents in per-assistant Docker containers, one stream protocol."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)
    from orchestrator.cli.appdir import resolve_app_dir

    resolved = resolve_app_dir(app_dir, Path.cwd())
    level = (log_level or "WARNING").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise UsageError(f"--log-level {log_level}: expected DEBUG, INFO, WARNING or ERROR")
    # Every `Settings()` built by a sub-command (or a module it calls) reads the same values.
    os.environ["CAGE_APP_DIR"] = str(resolved)
    os.environ["CAGE_LOG_LEVEL"] = level
    from orchestrator.logs import configure_logging

    configure_logging(level, stream=cast(TextIO, _CurrentStderr()))
    ctx.obj = {"app_dir": resolved, "log_level": level}


class _CurrentStderr:
    """`sys.stderr` as it is when a line is written: a test runner (typer's `CliRunner`, pytest)
    swaps it per invocation, and a logger bound to the old one would write to a closed file."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def _usage_error(exc: typer.TyperException) -> int:
    """One line naming the command and what is wrong, and where to read more."""
    ctx: Any = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "cage"
    if type(exc).__name__ == "NoArgsIsHelpError":  # a group without its sub-command: the help, shown
        if message := exc.format_message().strip():  # (rich help is printed while the error is built)
            typer.echo(message, err=True)
        return ExitCode.CONFIG
    typer.echo(f"{command}: {exc.format_message()}", err=True)
    typer.echo(f"hint: `{command} --help` lists the arguments and options", err=True)
    return ExitCode.CONFIG


def main(argv: list[str] | None = None) -> None:
    """Entry point: a Cage error exits with its kind's code (2 config/usage, 3 infrastructure, 1 else)."""
    command = typer.main.get_command(app)
    if os.environ.get("_CAGE_COMPLETE"):  # a shell asks for completions: typer's shell classes
        from typer._completion_classes import completion_init

        completion_init()
    try:
        code = command.main(argv, prog_name="cage", standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except CageError as exc:
        typer.echo(f"cage: {exc}", err=True)
        sys.exit(surfaces(exc).exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(ExitCode.INTERRUPTED)
    except KeyboardInterrupt:
        sys.exit(ExitCode.INTERRUPTED)
    except typer.TyperException as exc:  # click's usage errors, vendored by typer >= 0.26
        sys.exit(_usage_error(exc) if exc.exit_code == ExitCode.CONFIG else _other_error(exc))


def _other_error(exc: typer.TyperException) -> int:
    typer.echo(f"cage: {exc.format_message()}", err=True)
    return exc.exit_code or 1


def entry() -> NoReturn:
    """The `cage` executable: `main()` on the process's own arguments, then the process ends at once."""
    try:
        main()
    except SystemExit as exc:
        end_process(exc.code)
    end_process(0)


def end_process(code: str | int | None, report: Callable[[int], None] | None = None) -> NoReturn:
    """End the process as `sys.exit(code)` would, without the interpreter's teardown.

    By the time a command returns, everything it wrote is closed (store, artifacts, sandboxes); what
    is left is freeing every module and object one by one, which after a `cage run` (a thousand
    modules, the pydantic models) costs a second and more on a loaded machine. What a normal exit
    does that matters still happens: non-daemon threads are joined, `atexit` callbacks run (logging
    flushes its handlers there), stdout and stderr are flushed. `report` then hears the exit code
    (a fork server's child tells its client, `orchestrator/cli/forkserver.py`).
    """
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    if code is not None and not isinstance(code, int):
        sys.stderr.write(f"{code}\n")  # what `sys.exit("message")` prints
        code = 1
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except (OSError, ValueError):  # a closed pipe: Python's own exit reports it with 120
        code = code or 120
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    if report is not None:
        with contextlib.suppress(OSError):
            report(code or 0)
    os._exit(code or 0)
