"""Where the fork server listens and how a client talks to it; the standard library only.

The `cage` executable imports this module before anything else when it is asked for a run
(`orchestrator/cli/launch.py`), so it must stay as cheap as Python's own start-up: no typer, no
pydantic, nothing of Cage's, not even pathlib.

The socket lives in a directory of the user's own (mode 0700, checked on both sides, never a link)
and is named after a fingerprint of the code that would serve it: the interpreter, Cage's sources
and the installed packages. A server started before an upgrade or an edit is never used by the
new code (it idles out). Both ends check the other's uid on the connection (`SO_PEERCRED`).

The conversation, on one Unix stream socket:

* client → server, once: a 4-byte length, then a JSON request; for `run`, the client's stdin,
  stdout and stderr and its working directory travel beside it as descriptors (`SCM_RIGHTS`);
* client → server, then: one byte per signal the client was sent (SIGINT, SIGTERM, SIGHUP);
* server → client: JSON lines; the one with `exit` ends a run (`status` answers a status request).
"""

from __future__ import annotations

import array
import hashlib
import json
import os
import socket
import stat
import struct
import sys
from collections.abc import Iterator
from typing import Any

ENV_DIR = "CAGE_FORKSERVER_DIR"
"""The directory of the user's fork server sockets (default `$XDG_STATE_HOME/cage/forkserver`)."""
FORWARDED = (2, 15, 1)
"""The signals a client hands on to its run: SIGINT, SIGTERM, SIGHUP."""
MAX_REQUEST = 4 * 2**20
"""The longest request accepted: argv and environment."""
FDS = 4
"""Descriptors sent with a run: stdin, stdout, stderr, the working directory."""
_LENGTH = struct.Struct("!I")
PACKAGES = ("orchestrator", "runners")
"""Cage's packages: what the fingerprint covers, and what the server imports."""
_MAX_UNIX_PATH = 107


class WireError(Exception):
    """The other end broke the conversation (wrong uid, too long, malformed, gone)."""


def state_dir() -> str:
    """Cage's own state directory for this user: `$XDG_STATE_HOME/cage` (or
    `~/.local/state/cage`); `cage run`'s data dir unless `CAGE_DATA_DIR` says otherwise."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "cage")


def socket_dir() -> str:
    """The directory the user's fork server sockets are in."""
    return os.environ.get(ENV_DIR) or os.path.join(state_dir(), "forkserver")


def private_dir(path: str) -> bool:
    """`path` is a directory (not a link) of this user's that no one else may enter."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def fingerprint() -> str:
    """What the serving code is: the interpreter, the modification times and sizes of Cage's
    sources, the packages installed beside it. 16 hex digits."""
    digest = hashlib.sha256(f"{sys.executable}\0{sys.version}\0{os.getuid()}".encode())
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    for package in PACKAGES:
        for path, size, mtime in _sources(os.path.join(root, package)):
            digest.update(f"{path}\0{size}\0{mtime}\n".encode())
    for entry in sys.path:
        if entry.endswith("site-packages") and os.path.isdir(entry):
            digest.update(f"{entry}\0{os.stat(entry).st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _sources(directory: str) -> Iterator[tuple[str, int, int]]:
    with os.scandir(directory) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    yield from _sources(entry.path)
            elif entry.name.endswith(".py"):
                info = entry.stat(follow_symlinks=False)
                yield entry.path, info.st_size, info.st_mtime_ns


def socket_path(directory: str | None = None) -> str:
    """The socket of the fork server for this code.

    Raises:
        WireError: the path is too long for a Unix socket.
    """
    path = os.path.join(directory or socket_dir(), f"{fingerprint()}.sock")
    if len(os.fsencode(path)) > _MAX_UNIX_PATH:
        raise WireError(f"{path}: too long for a Unix socket ({_MAX_UNIX_PATH} bytes at most)")
    return path


def peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def connect(path: str) -> socket.socket | None:
    """A connection to the server at `path`, or None when there is none to trust: the directory is
    not private, nothing listens, or what listens runs as another user."""
    if not private_dir(os.path.dirname(path)):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        if peer_uid(conn) != os.getuid():
            raise OSError("the fork server runs as another user")
    except OSError:
        conn.close()
        return None
    return conn


def send_request(conn: socket.socket, request: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
    """Send one request, with `fds` beside its first byte."""
    body = json.dumps(request).encode()
    data = _LENGTH.pack(len(body)) + body
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sent = conn.sendmsg([data], ancillary)
    if sent < len(data):
        conn.sendall(data[sent:])


def receive_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """One request and the descriptors sent with it (the caller closes them).

    Raises:
        WireError: the request is cut short, too long, not a JSON object, or came with the wrong
            number of descriptors (those that came are closed).
    """
    data, ancillary, _flags, _addr = conn.recvmsg(65536, socket.CMSG_SPACE(FDS * 4))
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            received = array.array("i")
            received.frombytes(payload[: len(payload) - len(payload) % received.itemsize])
            fds.extend(received)
    try:
        if len(data) < _LENGTH.size:
            raise WireError("the request is cut short")
        (length,) = _LENGTH.unpack(data[: _LENGTH.size])
        if length > MAX_REQUEST:
            raise WireError(f"a request of {length} bytes (at most {MAX_REQUEST})")
        body = bytearray(data[_LENGTH.size :])
        while len(body) < length:
            chunk = conn.recv(min(65536, length - len(body)))
            if not chunk:
                raise WireError("the request is cut short")
            body += chunk
        request = json.loads(body[:length])
        if not isinstance(request, dict) or len(body) != length:
            raise WireError("the request is not one JSON object")
        if fds and len(fds) != FDS:
            raise WireError(f"{len(fds)} descriptors with the request (expected {FDS})")
    except (WireError, ValueError) as exc:
        for fd in fds:
            os.close(fd)
        raise WireError(str(exc)) from exc
    return request, fds


def send_line(conn: socket.socket, message: dict[str, Any]) -> None:
    """One JSON line to the client."""
    conn.sendall(json.dumps(message).encode() + b"\n")


def read_lines(conn: socket.socket) -> Iterator[dict[str, Any]]:
    """The server's JSON lines until it closes the connection."""
    pending = b""
    while chunk := conn.recv(65536):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            message = json.loads(line)
            if isinstance(message, dict):
                yield message
