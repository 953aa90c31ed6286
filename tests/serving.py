"""`cage serve` as a subprocess on a loopback port: `reserve_port`, `wait_until_healthy`, and
`ServeProcess` (start, `kill -9`, stop and start again on the same port).

A port found free by binding port 0 and closing the socket is free to everyone else too until the
server binds it, seconds later (it imports, migrates, reconciles first): a bind to port 0 meanwhile,
in any parallel test worker, may be given the same number, and the server then failed with
'address already in use'. `reserve_port` leaves the port in TCP's TIME_WAIT instead: Linux gives
such a port to no bind to port 0 and no outgoing connection, while a server binding it with
SO_REUSEADDR (uvicorn and Docker do) gets it at once. The reservation lasts TIME_WAIT's 60 s, so
`ServeProcess` reserves again right before each start and right after each stop.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

LOOPBACK = "127.0.0.1"


def reserve_port(port: int = 0) -> int:
    """Reserve `port` on 127.0.0.1 (0: a new one) for a server about to bind it; returns the port.

    Raises:
        OSError: `port` is in use (listened on, or bound without SO_REUSEADDR).
    """
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # binds over an old reservation
        listener.bind((LOOPBACK, port))
        listener.listen(1)
        address = listener.getsockname()
        with socket.create_connection(address):
            accepted, _ = listener.accept()
            accepted.close()  # closed first, this end of the connection (on the port) is the one in TIME_WAIT
    return int(address[1])


def wait_until_healthy(
    proc: subprocess.Popen[bytes], port: int, log: Path, *, within: float = 60, since: int = 0
) -> None:
    """Return once `/healthz` on 127.0.0.1:`port` says 200; fail with the server's log (from byte
    `since`: this start's part of a log several starts append to) when it exits first or does not
    answer within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"cage serve exited ({proc.returncode}):\n{_tail(log, since)}"
        try:
            if httpx.get(f"http://{LOOPBACK}:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"cage serve did not answer within {within:g} s:\n{_tail(log, since)}")


def _tail(log: Path, since: int) -> str:
    if not log.exists():
        return ""
    with log.open("rb") as file:
        file.seek(since)
        return file.read().decode(errors="replace")[-3000:]


class ServeProcess:
    """`cage serve` with `env` on 127.0.0.1:`port` (kept across restarts), its output appended to
    `log`. It runs in a session of its own, so `kill9` and `stop` end whatever it started too."""

    def __init__(self, name: str, env: dict[str, str], log: Path) -> None:
        self.name = name
        self.env = env
        self.log = log
        self.port = reserve_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self._since = 0
        """Where this start's output begins in `log`."""

    def launch(self) -> None:
        """Start the process without waiting for it (`wait_ready` waits)."""
        reserve_port(self.port)  # again: the last reservation may be older than TIME_WAIT
        self._since = self.log.stat().st_size if self.log.exists() else 0
        cage = Path(sys.executable).with_name("cage")
        argv = [str(cage), "serve", "--host", LOOPBACK, "--port", str(self.port)]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait_ready(self, timeout: float = 120.0) -> None:
        assert self.proc is not None
        wait_until_healthy(self.proc, self.port, self.log, within=timeout, since=self._since)

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def output(self) -> str:
        """What the last start wrote to the log."""
        return _tail(self.log, self._since)

    def kill9(self) -> None:
        """`kill -9` the server and everything it started; return once the server is reaped and
        no process of its session is left, so nothing of it holds a lock, a file or the port."""
        assert self.proc is not None
        if self.proc.poll() is None:  # not reaped: its pid is still its group's id
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._ended()

    def stop(self, grace: float = 40.0) -> None:
        """SIGTERM, then `kill -9` after `grace` seconds; what it started and left goes too."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.kill9()
                return
        self._ended()

    def _ended(self) -> None:
        """Once the server is reaped: `kill -9` what is left of its session, wait until none is
        left, and reserve the port again for the next start."""
        assert self.proc is not None
        group = self.proc.pid  # the session's process group: its id is the server's pid
        deadline = time.monotonic() + 30
        while left := _live_members(group):  # while any is left the group's id is not reused
            assert time.monotonic() < deadline, f"processes of {self.name} outlived it: {left}"
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
            time.sleep(0.05)
        with contextlib.suppress(OSError):  # taken meanwhile: the next `launch` says so
            reserve_port(self.port)


def _live_members(group: int) -> list[int]:
    """The pids of process group `group` that are not zombies (a zombie holds nothing)."""
    pids: list[int] = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _ppid, pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, IndexError, ValueError):
            continue
        if int(pgrp) == group and state != "Z":
            pids.append(int(stat.parent.name))
    return pids
