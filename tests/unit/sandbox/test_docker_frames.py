"""FrameDecoder (Docker's multiplexed exec stream) and the stderr head/tail capture."""

from __future__ import annotations

import struct

from orchestrator.sandbox.capture import HeadTailCapture
from orchestrator.sandbox.docker.frames import STDERR, STDOUT, FrameDecoder


def _frame(stream: int, payload: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(payload)) + payload


def _merge(pieces: list[tuple[int, bytes]]) -> dict[int, bytes]:
    out: dict[int, bytes] = {STDOUT: b"", STDERR: b""}
    for stream, data in pieces:
        out[stream] += data
    return out


def test_decodes_frames_split_at_every_byte() -> None:
    raw = _frame(STDOUT, b"hello\n") + _frame(STDERR, b"oops") + _frame(STDOUT, b"") + _frame(STDOUT, b"bye")
    decoder = FrameDecoder()
    pieces: list[tuple[int, bytes]] = []
    for i in range(len(raw)):
        pieces.extend(decoder.feed(raw[i : i + 1]))
    assert _merge(pieces) == {STDOUT: b"hello\nbye", STDERR: b"oops"}


def test_decodes_many_frames_in_one_read() -> None:
    raw = b"".join(_frame(STDOUT if i % 2 else STDERR, f"{i};".encode()) for i in range(100))
    merged = _merge(FrameDecoder().feed(raw))
    assert merged[STDOUT] == b"".join(f"{i};".encode() for i in range(1, 100, 2))
    assert merged[STDERR] == b"".join(f"{i};".encode() for i in range(0, 100, 2))


def test_capture_keeps_everything_below_the_cap() -> None:
    cap = HeadTailCapture(100)
    cap.write(b"abc")
    cap.write(b"def")
    assert cap.getvalue() == b"abcdef"


def test_capture_keeps_head_and_tail_of_a_long_stream() -> None:
    cap = HeadTailCapture(20)
    for i in range(1000):
        cap.write(f"{i:04d}\n".encode())
    value = cap.getvalue()
    assert value.startswith(b"0000\n0001")
    assert value.endswith(b"0998\n0999\n")
    assert b"bytes skipped" in value
    assert len(value) < 80
