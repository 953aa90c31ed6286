"""A bounded byte capture keeping the head and the tail of a stream (exec stderr)."""

from __future__ import annotations

from collections import deque


class HeadTailCapture:
    """Keep the first `keep_bytes // 2` and the last `keep_bytes // 2` bytes written.

    The head tells why a process failed to start, the tail why it died; the middle is dropped and
    replaced by a marker naming how many bytes were skipped.
    """

    def __init__(self, keep_bytes: int) -> None:
        self._head_cap = max(keep_bytes // 2, 1)
        self._tail_cap = max(keep_bytes - self._head_cap, 1)
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_len = 0
        self.total = 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data:
            return
        if len(data) >= self._tail_cap:
            self._tail.clear()
            self._tail.append(data[-self._tail_cap :])
            self._tail_len = self._tail_cap
            return
        self._tail.append(data)
        self._tail_len += len(data)
        while self._tail_len - len(self._tail[0]) >= self._tail_cap:
            self._tail_len -= len(self._tail.popleft())

    def getvalue(self) -> bytes:
        tail = b"".join(self._tail)
        if len(tail) > self._tail_cap:
            tail = tail[-self._tail_cap :]
        skipped = self.total - len(self._head) - len(tail)
        if skipped <= 0:
            return bytes(self._head) + tail
        return bytes(self._head) + f"\n[... {skipped} bytes skipped ...]\n".encode() + tail
