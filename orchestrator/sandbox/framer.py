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
        if b"\n" not in data:
            out: list[FramedItem] = []
            self._hold(data, out)
            return out
        # One split per chunk: a read holds hundreds of lines, and this is the per-line hot path.
        *lines, tail = data.split(b"\n")
        out = []
        first = lines[0]
        if self._discarding:
            self._discarding = False  # the overlong line ends here; its marker went out already
        elif self._pending_len + len(first) > self.max_line_bytes:
            self._drop_pending()
            out.append(StreamLimitError(self.max_line_bytes))
        else:
            self._pending.append(first)
            out.append(self._take())
        cap = self.max_line_bytes
        if len(data) <= cap:  # the usual read: no line in it can be over the cap
            out += lines[1:]
        else:
            out.extend(line if len(line) <= cap else StreamLimitError(cap) for line in lines[1:])
        self._hold(tail, out)
        return out

    def close(self) -> list[FramedItem]:
        """End of stream: an unterminated last line is returned as a line."""
        if self._discarding:
            self._discarding = False
            return []
        if self._pending_len or self._pending:
            return [self._take()]
        return []

    def _hold(self, piece: bytes, out: list[FramedItem]) -> None:
        """Keep `piece` as part of the unterminated line, or start discarding it past the cap."""
        if self._discarding or not piece:
            return
        if self._pending_len + len(piece) > self.max_line_bytes:
            self._drop_pending()
            self._discarding = True
            out.append(StreamLimitError(self.max_line_bytes))
            return
        self._pending.append(piece)
        self._pending_len += len(piece)

    def _drop_pending(self) -> None:
        self._pending.clear()
        self._pending_len = 0

    def _take(self) -> bytes:
        if not self._pending:
            return b""
        line = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        self._pending_len = 0
        return line
