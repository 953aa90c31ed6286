"""Bounded newline framing for exec output (STYLE R7).

A runner prints one JSON object per line; a line can be large (a file read back by a tool), but a
runaway process must not grow our memory without bound. `LineFramer` keeps at most
`max_line_bytes` of a pending line. A longer line is dropped and replaced, in order, by a
`StreamLimitError` item; framing resumes at the next newline. Pending pieces are kept in a list and
joined once per line, so a 50 MB line costs O(n), not O(n²).
"""

from __future__ import annotations

from orchestrator.errors import StreamLimitError

FramedItem = bytes | StreamLimitError


class LineFramer:
    """Split a byte stream into lines (without the `\\n`), never buffering more than the cap."""

    def __init__(self, max_line_bytes: int) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self.max_line_bytes = max_line_bytes
        self._pending: list[bytes] = []
        self._pending_len = 0
        self._discarding = False

    @property
    def buffered(self) -> int:
        """Bytes of the current, unterminated line held in memory."""
        return self._pending_len

    def feed(self, data: bytes) -> list[FramedItem]:
        """Add bytes; return the lines (and limit markers) they complete."""
        out: list[FramedItem] = []
        start = 0
        end = len(data)
        while start < end:
            nl = data.find(b"\n", start)
            if nl == -1:
                self._hold(data, start, end, out)
                break
            self._hold(data, start, nl, out)
            if self._discarding:
                self._discarding = False
            else:
                out.append(self._take())
            start = nl + 1
        return out

    def close(self) -> list[FramedItem]:
        """End of stream: an unterminated last line is returned as a line."""
        if self._discarding:
            self._discarding = False
            return []
        if self._pending_len or self._pending:
            return [self._take()]
        return []

    def _hold(self, data: bytes, start: int, stop: int, out: list[FramedItem]) -> None:
        if self._discarding or start == stop:
            return
        if self._pending_len + (stop - start) > self.max_line_bytes:
            self._pending.clear()
            self._pending_len = 0
            self._discarding = True
            out.append(StreamLimitError(self.max_line_bytes))
            return
        self._pending.append(data[start:stop] if (start, stop) != (0, len(data)) else data)
        self._pending_len += stop - start

    def _take(self) -> bytes:
        if not self._pending:
            return b""
        line = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        self._pending_len = 0
        return line
