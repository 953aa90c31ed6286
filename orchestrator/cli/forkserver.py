"""The fork server: a process of the user's own that has imported Cage once and forks a child for
each `cage run` handed to it (`orchestrator/cli/launch.py`), so a run skips the half second of
imports (`docs/performance.md`, "`cage run`").

A child is the run's process in all but its parent: it takes the client's stdin, stdout, stderr,
working directory, umask, environment and arguments before Cage reads any of them, then runs the
command as `cage` would. The server itself holds no settings, no store, no engine client and no
thread: only imported modules, so a child starts from what a fresh process would compute. It
serves only its own uid, stops taking runs on `stop` or SIGTERM and exits once its children have
ended, and exits by itself after a time with none.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import gc
import importlib
import logging
import os
import pkgutil
import selectors
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import structlog

from orchestrator.cli import forkwire
from orchestrator.cli.launch import LOST

log = structlog.get_logger("cage.forkserver")

_SKIPPED = (".incontainer", ".__main__", "orchestrator.store.migrations", "orchestrator.cli.forkserver")
"""Modules not imported ahead: what runs inside a container, scripts (entry points, migrations)."""
_AHEAD = (
    "sqlalchemy.dialects.sqlite.aiosqlite",
    "sqlalchemy.dialects.postgresql.asyncpg",
    "aiosqlite",
    "anyio._backends._asyncio",
    "concurrent.futures.thread",
    "ctypes.util",
    "httpcore",
    "httpcore._backends.anyio",
    "httpcore._backends.trio",
    "uvicorn.lifespan.off",
    "uvicorn.protocols.http.httptools_impl",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.websockets.websockets_sansio_impl",
    "websockets.server",
    "typer._adapters",
)
"""Modules a run imports on first use rather than at any module's import (each one an ImportError
skips: some are installed only beside the tests). Missing one costs a child time, never more."""
_MALFORMED_RUN = "a run needs argv and env (strings), a umask and 4 descriptors"
REQUEST_TIMEOUT = 5.0
"""Seconds a client has to send its request once connected."""


def warm() -> int:
    """Import every host module of Cage's and what a run loads on first use; how many modules are
    loaded then. The collector is off meanwhile, and what is left afterwards is frozen out of its
    sight (`orchestrator/cli/lazy.py` says why), where every child finds it."""
    gc.disable()
    try:
        for name in _AHEAD:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        for package in forkwire.PACKAGES:
            root = importlib.import_module(package)
            for info in pkgutil.walk_packages(root.__path__, f"{package}."):
                if not any(part in info.name for part in _SKIPPED):
                    importlib.import_module(info.name)
    finally:
        gc.collect()
        gc.freeze()
        gc.enable()
    return len(sys.modules)


class ForkServer:
    """Accepts runs on a listening socket and reports each child's exit status to its client."""

    def __init__(self, listener: socket.socket, path: Path, idle: float) -> None:
        self._listener: socket.socket | None = listener
        self._path = path
        self._inode = path.stat().st_ino
        """The socket file this server made (a later server's, at the same path, is not removed)."""
        self._idle = idle
        self._children: dict[int, socket.socket] = {}
        self._runs = 0
        self._stopping = False
        self._started = time.time()
        self._last = time.monotonic()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def serve(self) -> None:
        """Until stopped (and its children ended) or idle for the idle time."""
        assert self._listener is not None
        if threading.active_count() != 1:
            raise RuntimeError("a fork server must have one thread when it forks")
        signal.set_wakeup_fd(self._wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, lambda *_: self.stop())
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        log.info("forkserver.listening", socket=str(self._path), pid=os.getpid(), modules=len(sys.modules))
        while True:
            self._reap()
            if not self._children and (self._stopping or time.monotonic() - self._last >= self._idle):
                break
            waiting = self._children or self._stopping
            timeout = None if waiting else self._idle - (time.monotonic() - self._last)
            for key, _ in self._selector.select(timeout):
                if key.fileobj is self._listener:
                    self._accept()
                else:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._wake_r, 512)
        self._close_listener()
        log.info("forkserver.exit", runs=self._runs)

    def stop(self) -> None:
        """Take no more runs; exit once the running ones ended."""
        self._stopping = True
        self._close_listener()

    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "socket": str(self._path),
            "started": self._started,
            "runs": self._runs,
            "running": len(self._children),
            "idle_exit_s": self._idle,
            "stopping": self._stopping,
        }

    def _close_listener(self) -> None:
        if self._listener is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(self._listener)
        with contextlib.suppress(FileNotFoundError):
            if self._path.stat().st_ino == self._inode:
                self._path.unlink()
        self._listener.close()
        self._listener = None

    def _accept(self) -> None:
        assert self._listener is not None
        try:
            conn, _ = self._listener.accept()
        except BlockingIOError:
            return
        conn.settimeout(REQUEST_TIMEOUT)
        try:
            if (uid := forkwire.peer_uid(conn)) != os.getuid():
                raise forkwire.WireError(f"a client of uid {uid}")
            request, fds = forkwire.receive_request(conn)
        except (OSError, forkwire.WireError) as exc:
            log.warning("forkserver.refused", reason=str(exc))
            conn.close()
            return
        self._last = time.monotonic()
        op = request.get("op")
        if op == "run" and fds and (run := _run_request(request)) is not None:
            conn.settimeout(None)
            self._fork(conn, run, fds)
            return
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            if op == "run":
                forkwire.send_line(conn, {"error": _MALFORMED_RUN})
            elif op == "status":
                forkwire.send_line(conn, {"status": self.status()})
            elif op == "stop":
                self.stop()
                forkwire.send_line(
                    conn, {"stopping": True, "pid": os.getpid(), "running": len(self._children)}
                )
            else:
                forkwire.send_line(conn, {"error": f"not a request: {str(op)[:40]!r}"})
        conn.close()

    def _fork(self, conn: socket.socket, run: _Run, fds: list[int]) -> None:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()  # the server's own log lines, never a child's to write again
        try:
            pid = os.fork()
        except OSError as exc:
            log.warning("forkserver.fork_failed", error=str(exc))
            for fd in fds:
                os.close(fd)
            conn.close()  # the client sees no status and says so
            return
        if pid == 0:
            try:
                self._forget()
                child(conn, run, fds)
            finally:
                os._exit(LOST)
        for fd in fds:
            os.close(fd)
        self._children[pid] = conn
        self._runs += 1

    def _forget(self) -> None:
        """In a child: close what belongs to the server."""
        self._selector.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        if self._listener is not None:
            self._listener.close()
        for other in self._children.values():
            other.close()

    def _reap(self) -> None:
        while self._children:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self._children.pop(pid, None)
            if conn is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            code = code if code >= 0 else 128 - code
            cpu = round(usage.ru_utime + usage.ru_stime, 3)
            log.info("forkserver.run_ended", pid=pid, exit_code=code, cpu_s=cpu, max_rss_kib=usage.ru_maxrss)
            with contextlib.suppress(OSError):  # the child's own report came first, or no one waits
                forkwire.send_line(conn, {"exit": code})
            conn.close()
            self._last = time.monotonic()


@dataclass(frozen=True)
class _Run:
    """A run request, checked."""

    argv: list[str]
    env: dict[str, str]
    umask: int


def _run_request(request: dict[str, Any]) -> _Run | None:
    argv, env, umask = request.get("argv"), request.get("env"), request.get("umask")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        return None
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        return None
    if not (isinstance(umask, int) and 0 <= umask <= 0o777):
        return None
    return _Run(argv, env, umask)


def child(conn: socket.socket, run: _Run, fds: list[int]) -> NoReturn:
    """Become the run's process, run `cage <argv>`, report the exit code and end."""
    signal.set_wakeup_fd(-1)
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    os.fchdir(fds[3])
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.umask(run.umask)
    os.environ.clear()
    os.environ.update(run.env)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - the process's own, never closed
    line = 1 if os.isatty(1) else -1
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False, buffering=line)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)  # noqa: SIM115
    sys.argv = ["cage", *run.argv]
    threading.Thread(target=_forward_signals, args=(conn,), name="forkserver-signals", daemon=True).start()

    from orchestrator.cli.app import end_process, main

    code: str | int | None = 0
    try:
        main(run.argv)
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: BLE001 - what an uncaught error does to a process of its own
        traceback.print_exc()
        code = 1
    end_process(code, report=lambda final: forkwire.send_line(conn, {"exit": final}))


def _forward_signals(conn: socket.socket) -> None:
    """Deliver the signals the client forwards; when the client is gone, end the run as SIGTERM
    would (its box is removed, as for an interrupted `cage run`)."""
    while True:
        try:
            data = conn.recv(64)
        except OSError:
            data = b""
        if not data:
            os.kill(os.getpid(), signal.SIGTERM)
            return
        for signum in data:
            if signum in forkwire.FORWARDED:
                os.kill(os.getpid(), signum)


def _listen(path: Path) -> socket.socket:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a socket left by a server that was killed (we hold the lock)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    path.chmod(0o600)
    listener.listen(64)
    listener.setblocking(False)
    return listener


def main(argv: list[str] | None = None) -> int:
    """`python -m orchestrator.cli.forkserver --idle SECONDS`: serve until stopped or idle."""
    parser = argparse.ArgumentParser(prog="cage-forkserver")
    parser.add_argument("--idle", type=float, required=True, help="Seconds with no run before it exits.")
    args = parser.parse_args(argv)
    from orchestrator.logs import configure_logging

    configure_logging("INFO", stream=sys.stderr)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its plugins announce themselves on import
    path = Path(forkwire.socket_path())
    if not forkwire.private_dir(str(path.parent)):
        log.error("forkserver.unsafe_dir", directory=str(path.parent))
        return 2
    with path.with_suffix(".lock").open("a") as lock:  # one server per socket
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("forkserver.already_serving", socket=str(path))
            return 0
        started = time.perf_counter()
        modules = warm()
        log.info("forkserver.warm", modules=modules, seconds=round(time.perf_counter() - started, 3))
        ForkServer(_listen(path), path, args.idle).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
