"""`cage serve` as a subprocess on a loopback port: `reserve_port`, then `wait_until_healthy`.

A port found free by binding port 0 and closing the socket is free to everyone else too until the
server binds it, seconds later (it imports, migrates, reconciles first): a bind to port 0 meanwhile,
in any parallel test worker, may be given the same number, and the server then failed with
'address already in use'. `reserve_port` leaves the port in TCP's TIME_WAIT instead: Linux gives
such a port to no bind to port 0 and no outgoing connection, while a server binding it with
SO_REUSEADDR (uvicorn and Docker do) gets it at once. The reservation lasts TIME_WAIT's 60 s, so
a harness reserves again right before each start (and right after a stop, for a restart).
"""

from __future__ import annotations

import socket
import subprocess
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
