"""Demultiplex Docker's attach/exec stream (non-TTY): 8-byte headers `[stream,0,0,0,len BE32]`."""

from __future__ import annotations

import struct

STDOUT = 1
STDERR = 2
_HEADER = struct.Struct(">BxxxL")


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
