"""The egress proxy's configuration, rewritten under a lock that the proxy itself holds.

Every Cage process that uses an engine shares its proxy (`cage-egress`): `cage serve`, a CI job's
`cage run` with a data directory of its own, a replica in a container, another user of the same
engine. Each renders squid's configuration from the engine's state, so they converge, but only if
no render taken before another process's box existed is written after that process's own: the box
would then be left out (it fails closed) until the next rewrite. A lock file on the host covers
the processes that share it and no others, so the lock lives in the proxy's container instead.

`ConfigLock` is one `exec` in the proxy, as root (its capabilities are dropped, as the
container's are): `flock` on a file of the container's own, and under it a shell that says
`locked` with the digests of the configuration it finds and of the last one squid was seen to
take, reads the new configuration's size and bytes from its stdin, writes them beside the file
and renames them over it (a rewrite cut short leaves the file as it was), says `written`, and,
told `taken` once squid has taken it, records its digest. The lock is released when the exec
ends: when the caller is done, and when the caller's process dies, since the engine closes the
exec's stdin with its connection. Everything the caller renders, writes and waits for happens
between `locked` and that end.

Boxes that start together each ask for a rewrite; the render of the first to get the lock already
names those whose networks existed by then, so a later holder whose render is the same text, which
squid took, writes nothing and sends no signal (`holds`): a burst costs a few rewrites, not one
per box. The exec costs what the `put_archive` it replaced did (about 30 ms here), and it starts
while another holder still has the lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import time
from collections.abc import Iterator
from typing import Any

import docker

from orchestrator.errors import SandboxError
from orchestrator.sandbox.docker.frames import STDOUT, ExecStream, FrameDecoder, hijacked

LOCK_FILE = "/tmp/cage-egress.lock"
"""The lock's file in the proxy's container (its own `/tmp`, which no one else writes)."""
LOCK_SECONDS = 90
"""How long a rewrite waits for the lock: a holder waits at most 30 s for squid, then lets go."""
WRITE_SECONDS = 30.0
"""How long the proxy may take to say `written` once it has the configuration."""
_MAX_SAID = 4096
"""More than the shell ever says (a line with two digests, a word); a proxy saying more is refused."""
SCRIPT = r"""
digest() { sha256sum < "$1" 2>/dev/null | cut -c1-64; }
printf 'locked %s %s\n' "$(digest "$1")" "$(cat "$2" 2>/dev/null)"
IFS= read -r size || exit 0
case $size in ''|*[!0-9]*) exit 4;; esac
new="$1.cage-new"
head -c "$size" > "$new" || exit 5
[ "$(wc -c < "$new")" -eq "$size" ] || { rm -f "$new"; exit 6; }
mv -f "$new" "$1" || exit 7
printf 'written\n'
IFS= read -r word || exit 0
[ "$word" = taken ] || exit 0
digest "$1" > "$2.new" && mv -f "$2.new" "$2"
"""
"""Run by `sh -c` under `flock`, with the configuration's path as `$1` and `TAKEN_FILE` as `$2`."""
TAKEN_FILE = "/tmp/cage-egress.taken"
"""The digest of the last configuration squid was seen to take (`ConfigLock.confirm`)."""


def lock_argv(conf: str) -> list[str]:
    """The exec that takes the proxy's lock and writes `conf` under it."""
    return ["flock", "-w", str(LOCK_SECONDS), LOCK_FILE, "sh", "-c", SCRIPT, "sh", conf, TAKEN_FILE]


class ConfigLock:
    """The proxy's lock, held: `write` one configuration under it. Made by `config_lock`."""

    def __init__(self, api: docker.APIClient, proxy: str, exec_id: str, stream: ExecStream) -> None:
        self._api, self._proxy, self._exec_id, self._stream = api, proxy, exec_id, stream
        self._frames = FrameDecoder()
        self._said = b""
        self._found: tuple[str, str] = ("", "")
        """The digests of the configuration found in the proxy and of the last one squid took."""

    def write(self, text: str) -> None:
        """Write `text` as the configuration, whole or not at all.

        Raises:
            SandboxError: the proxy did not write it (its shell's exit code says why).
        """
        data = text.encode()
        self._stream.sock.sendall(b"%d\n" % len(data) + data)
        self._expect(b"written\n", time.monotonic() + WRITE_SECONDS, "write its configuration")

    def await_grant(self) -> None:
        """Return once the proxy's shell has the lock (it says so).

        Raises:
            SandboxError: not within `LOCK_SECONDS` (and a margin), or the exec ended first.
        """
        line = self._expect(b"\n", time.monotonic() + LOCK_SECONDS + 5, "grant its configuration's lock")
        word, _, rest = line.decode(errors="replace").partition(" ")
        if word != "locked":
            raise SandboxError(self._proxy, "the egress proxy's lock said something else than `locked`")
        found, _, taken = rest.partition(" ")
        self._found = (found, taken)

    def holds(self, text: str) -> bool:
        """Whether the proxy's configuration is `text` already, and squid was seen to take it
        (`confirm`): a rewrite of the same would change nothing."""
        found, taken = self._found
        return bool(found) and found == taken == hashlib.sha256(text.encode()).hexdigest()

    def confirm(self) -> None:
        """Record that squid has taken the configuration written here, so that a rewrite of the
        same text by the next holder is skipped (`holds`)."""
        self._stream.sock.sendall(b"taken\n")

    def _expect(self, word: bytes, deadline: float, what: str) -> bytes:
        """Read the exec's stdout until it says `word`; what it said before, and `word` consumed."""
        while word not in self._said:
            left = deadline - time.monotonic()
            chunk = b""
            if left > 0:
                self._stream.sock.settimeout(left)
                with contextlib.suppress(TimeoutError):
                    chunk = self._stream.reader.read1(4096)
            if not chunk:
                raise SandboxError(self._proxy, f"the egress proxy did not {what}{self._ended()}")
            for stream, payload in self._frames.feed(chunk):
                if stream == STDOUT:
                    self._said += payload
            if len(self._said) > _MAX_SAID:
                raise SandboxError(self._proxy, f"the egress proxy said too much while it should {what}")
        before, self._said = self._said.split(word, 1)
        return before

    def _ended(self) -> str:
        """How the exec ended, for an error message ("" while it still runs)."""
        with contextlib.suppress(docker.errors.DockerException):
            info: dict[str, Any] = self._api.exec_inspect(self._exec_id)
            if not info.get("Running"):
                return f" (its lock's exec ended with exit code {info.get('ExitCode')})"
        return " in time"

    def release(self) -> None:
        """End the exec (its stdin closes, its shell returns, `flock` lets go) and close the connection."""
        with contextlib.suppress(OSError):  # a read that timed out leaves the reader unusable: fine
            self._stream.sock.shutdown(socket.SHUT_WR)
            self._stream.sock.settimeout(WRITE_SECONDS)
            while self._stream.reader.read1(4096):  # the exec's end: the lock is free from here
                pass
        self._stream.sock.close()


@contextlib.contextmanager
def config_lock(api: docker.APIClient, proxy: str, conf: str) -> Iterator[ConfigLock]:
    """Hold the lock of `proxy` (a container id or name) for a rewrite of its configuration at
    `conf`, waiting up to `LOCK_SECONDS` for another holder to let go.

    Raises:
        SandboxError: the lock was not granted (the proxy stopped, or another holder kept it).
        docker.errors.DockerException: the engine refused the exec.
    """
    created = api.exec_create(proxy, lock_argv(conf), stdin=True, stdout=True, stderr=True, user="root")
    stream = hijacked(api.exec_start(created["Id"], socket=True), proxy)
    held = ConfigLock(api, proxy, str(created["Id"]), stream)
    try:
        held.await_grant()
        yield held
    finally:
        held.release()
