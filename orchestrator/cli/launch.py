"""The `cage` executable: `cage run` starts in the user's fork server when one listens, every
other command (and `cage run` without a server) in this process.

A fork server (`cage forkserver start`, `orchestrator/cli/forkserver.py`) is a process of the
user's own with Cage's modules already imported; it forks a child for each run and the child runs
the command as this process would have: the same arguments, environment, umask, working
directory, stdin, stdout and stderr. This process forwards the signals it gets to the child and
exits with the child's exit code. It imports only the standard library until it knows a run will
not be handed over, so a handed-over run pays Python's start-up and nothing of Cage's imports.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    import socket

ENV_SWITCH = "CAGE_FORKSERVER"
"""`off`: `cage run` runs in a process of its own even when a fork server listens."""
_VALUED = frozenset({"--app", "--log-level"})
"""The root's options that take a value (`cage --app DIR run ...`)."""
LOST = 3
"""The exit code when the fork server's child ended and no exit status came back (infrastructure)."""


def subcommand(argv: Sequence[str]) -> str | None:
    """The sub-command `argv` names after the root's options, if any."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _VALUED:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def handed_over(argv: Sequence[str]) -> int | None:
    """Run `cage <argv>` in the fork server: the child's exit code, or None when there is no server
    to hand it to (nothing was started, so the caller runs the command itself)."""
    if os.environ.get(ENV_SWITCH, "").lower() == "off" or subcommand(argv) != "run":
        return None
    from orchestrator.cli import forkwire  # only now: `cage --help` pays nothing for it

    try:
        conn = forkwire.connect(forkwire.socket_path())
    except (OSError, forkwire.WireError):
        return None
    if conn is None:
        return None
    with conn:
        try:
            cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:  # no directory to hand over (removed under us): this process says so
            return None
        umask = os.umask(0o022)
        os.umask(umask)
        try:
            request = {"op": "run", "argv": list(argv), "env": dict(os.environ), "umask": umask}
            forkwire.send_request(conn, request, (0, 1, 2, cwd))
        except OSError:
            return None  # the server did not take it: nothing runs, so this process does
        finally:
            os.close(cwd)
        return _follow(conn)


def _follow(conn: socket.socket) -> int:
    """Forward signals to the run until its exit status comes."""
    import signal

    from orchestrator.cli import forkwire

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):  # the run is over: its status is on its way or lost
            conn.send(bytes([signum]))

    for signum in forkwire.FORWARDED:
        signal.signal(signum, forward)
    try:
        for message in forkwire.read_lines(conn):
            if isinstance(message.get("exit"), int):
                return int(message["exit"])
    except (OSError, ValueError):
        pass
    sys.stderr.write("cage: the fork server's run ended without an exit status\n")
    return LOST


def entry() -> NoReturn:
    """The `cage` executable."""
    code = handed_over(sys.argv[1:])
    if code is not None:
        os._exit(code)
    from orchestrator.cli.app import entry as here

    here()
