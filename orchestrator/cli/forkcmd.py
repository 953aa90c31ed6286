"""`cage forkserver start|stop|status`: the user's fork server, which starts `cage run` with its
imports already done (`orchestrator/cli/forkserver.py`)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from orchestrator.cli import forkwire
from orchestrator.dsl.units import parse_duration
from orchestrator.error_table import ExitCode
from orchestrator.errors import UsageError

app = typer.Typer(
    help="Start, stop or show the fork server that starts `cage run` with Cage already imported.",
    no_args_is_help=True,
    add_completion=False,
)
START_TIMEOUT = 120.0
"""Seconds `start` waits for a new server to listen (it imports all of Cage first)."""


def _ask(path: Path, op: str) -> dict[str, Any] | None:
    """The server's one-line answer to `op`, or None when no server of ours listens at `path`."""
    conn = forkwire.connect(str(path))
    if conn is None:
        return None
    with conn:
        conn.settimeout(10)
        try:
            forkwire.send_request(conn, {"op": op})
            return next(forkwire.read_lines(conn), None)
        except (OSError, ValueError):
            return None


def _path() -> Path:
    try:
        return Path(forkwire.socket_path())
    except forkwire.WireError as exc:
        raise UsageError(f"{forkwire.ENV_DIR}: {exc}") from exc


def _prune(directory: Path, keep: Path | None = None) -> None:
    """Remove the files of servers that are gone (their lock is free): sockets, locks and logs of
    older code, and a socket left by a server of this code that was killed (`keep`'s log stays)."""
    for lock in directory.glob("*.lock"):
        with lock.open("a") as held:
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a server holds it
            mine = keep is not None and lock.stem == keep.stem
            for leftover in [lock.with_suffix(".sock"), *([] if mine else [lock.with_suffix(".log")]), lock]:
                leftover.unlink(missing_ok=True)


def _private_dir(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not forkwire.private_dir(str(directory)):
        raise UsageError(
            f"{directory}: the fork server's directory must be a directory of uid {os.getuid()}'s "
            "that no one else may enter (mode 0700, not a link)"
        )


@app.command()
def start(
    idle: Annotated[str, typer.Option("--idle", help="Exit after this long with no run: 30m, 2h.")] = "30m",
) -> None:
    """Start the fork server for this installation of Cage (nothing happens if it runs already)."""
    try:
        seconds = parse_duration(idle).total_seconds()
    except ValueError as exc:
        raise UsageError(f"--idle: {exc}") from exc
    if seconds <= 0:
        raise UsageError("--idle: must be more than zero")
    path = _path()
    _private_dir(path.parent)
    _prune(path.parent, keep=path)
    answer = _ask(path, "status")
    if answer is not None and not answer["status"]["stopping"]:
        typer.echo(f"cage: the fork server runs already (pid {answer['status']['pid']}, {path})")
        return
    with path.with_suffix(".log").open("ab") as log:
        path.with_suffix(".log").chmod(0o600)
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli.forkserver", "--idle", str(seconds)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,  # no terminal: its children get signals from their clients only
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        answer = _ask(path, "status")
        if answer is not None and not answer["status"]["stopping"]:
            typer.echo(f"cage: fork server ready (pid {answer['status']['pid']}, {path})")
            return
        if process.poll() is not None and _ask(path, "status") is None:
            _fail(f"the fork server exited ({process.returncode}) before it listened", path)
        time.sleep(0.05)
    _fail(f"the fork server did not listen within {START_TIMEOUT:.0f}s", path)


def _fail(message: str, path: Path) -> NoReturn:
    typer.echo(f"cage: {message}; its log: {path.with_suffix('.log')}", err=True)
    raise typer.Exit(ExitCode.INFRA)


@app.command()
def stop() -> None:
    """Stop every fork server of this user (also those of older code); runs in them finish first."""
    directory = Path(forkwire.socket_dir())
    if not forkwire.private_dir(str(directory)):  # none of ours could be there
        typer.echo("cage: no fork server was running")
        return
    stopped = 0
    for path in sorted(directory.glob("*.sock")):
        answer = _ask(path, "stop")
        if answer is not None:
            stopped += 1
            running = answer.get("running", 0)
            if running:
                typer.echo(f"cage: fork server at {path} stopping; {running} run(s) in it finish first")
            else:
                _wait_gone(int(answer.get("pid", 0)))
                typer.echo(f"cage: fork server at {path} stopped")
    if not stopped:
        typer.echo("cage: no fork server was running")
    _prune(directory)


def _wait_gone(pid: int, timeout: float = 10.0) -> None:
    """Until process `pid` has exited (a server with no runs exits at once), or `timeout`."""
    deadline = time.monotonic() + timeout
    while pid > 0 and Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.02)


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """Whether the fork server for this installation runs; exit 1 when it does not."""
    answer = _ask(_path(), "status")
    info = answer["status"] if answer is not None else None
    if as_json:
        typer.echo(json.dumps(info))
    elif info is None:
        typer.echo("cage: no fork server runs for this installation (`cage forkserver start`)")
    else:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["started"]))
        typer.echo(
            f"pid {info['pid']}  since {since}  runs {info['runs']}  running {info['running']}  "
            f"idle exit {info['idle_exit_s']:.0f}s  {info['socket']}"
        )
    if info is None:
        raise typer.Exit(1)
