"""Docker's attach/exec stream (non-TTY): where to read it (`hijacked`), and its frames, 8-byte
headers `[stream,0,0,0,len BE32]` (`FrameDecoder`)."""

from __future__ import annotations

import socket
import struct
from io import BufferedReader
from typing import Any, NamedTuple

from orchestrator.errors import SandboxError

STDOUT = 1
STDERR = 2
_HEADER = struct.Struct(">BxxxL")


class ExecStream(NamedTuple):
    """A started exec's hijacked connection (what `exec_start(socket=True)` returned)."""

    sock: socket.socket
    """The raw socket: stdin is written and shut down on it, timeouts set on it."""
    reader: BufferedReader
    """Where the stream is read: the engine's HTTP answer was read through this buffer, and the
    stream's first bytes may be in it already (a process that printed at once), never again on
    the socket."""
    response: Any
    """The HTTP response, kept as long as the stream: dropping it may close the socket."""


def hijacked(started: Any, name: str) -> ExecStream:
    """The stream of an exec that `exec_start(socket=True)` started.

    Raises:
        SandboxError: the Docker transport hands out no such stream (`name` says whose).
    """
    try:
        return ExecStream(getattr(started, "_sock", started), started._response.raw._fp.fp, started._response)
    except AttributeError as exc:
        raise SandboxError(name, "this Docker transport does not support exec streams") from exc


class FrameDecoder:
    """Incremental decoder: feed raw socket bytes, get `(stream, payload)` pieces back.

    A frame's payload may be returned in several pieces (as it arrives), so memory stays bounded
    by the read size, not by the frame size.
    """

    def __init__(self) -> None:
        self._header = bytearray()
        self._stream = 0
        self._remaining = 0

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        view = memoryview(data)
        pos = 0
        n = len(data)
        while pos < n:
            if self._remaining == 0:
                need = _HEADER.size - len(self._header)
                self._header += view[pos : pos + need]
                pos += min(need, n - pos)
                if len(self._header) < _HEADER.size:
                    break
                self._stream, self._remaining = _HEADER.unpack(bytes(self._header))
                self._header.clear()
                continue
            take = min(self._remaining, n - pos)
            out.append((self._stream, bytes(view[pos : pos + take])))
            pos += take
            self._remaining -= take
        return out
