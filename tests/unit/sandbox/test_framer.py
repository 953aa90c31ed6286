"""LineFramer: bounded newline framing (R7)."""

from __future__ import annotations

import random
import time

import pytest

from orchestrator.errors import StreamLimitError
from orchestrator.sandbox.framer import LineFramer


def _feed_all(framer: LineFramer, chunks: list[bytes]) -> list[bytes | StreamLimitError]:
    out: list[bytes | StreamLimitError] = []
    for chunk in chunks:
        out.extend(framer.feed(chunk))
    out.extend(framer.close())
    return out


def test_splits_lines_across_chunk_boundaries() -> None:
    out = _feed_all(LineFramer(100), [b"ab", b"c\nde", b"f\n\ng", b"h"])
    assert out == [b"abc", b"def", b"", b"gh"]


def test_line_of_exactly_the_cap_passes() -> None:
    out = _feed_all(LineFramer(4), [b"abcd\n"])
    assert out == [b"abcd"]


def test_too_long_line_becomes_one_marker_and_stream_goes_on() -> None:
    framer = LineFramer(8)
    out = _feed_all(framer, [b"ok\n", b"0123456", b"789abcdef", b"ghij\nnext\n"])
    assert out[0] == b"ok"
    assert isinstance(out[1], StreamLimitError)
    assert out[1].limit == 8
    assert "8-byte cap" in str(out[1])
    assert out[2:] == [b"next"]


def test_never_buffers_more_than_the_cap() -> None:
    framer = LineFramer(1000)
    peak = 0
    for _ in range(100):
        framer.feed(b"x" * 300)
        peak = max(peak, framer.buffered)
    assert peak <= 1000
    assert framer.feed(b"\nfine\n")[-1] == b"fine"


def test_unterminated_overlong_tail_is_dropped_silently_at_close() -> None:
    framer = LineFramer(3)
    out = framer.feed(b"abcdef")
    assert len(out) == 1 and isinstance(out[0], StreamLimitError)
    assert framer.close() == []


def test_fifty_megabyte_line_intact_and_linear() -> None:
    line = bytes(range(256)).replace(b"\n", b"") * (50 * 2**20 // 255)
    framer = LineFramer(64 * 2**20)
    started = time.perf_counter()
    out: list[bytes | StreamLimitError] = []
    for i in range(0, len(line), 32 * 1024):
        out.extend(framer.feed(line[i : i + 32 * 1024]))
    out.extend(framer.feed(b"\n"))
    elapsed = time.perf_counter() - started
    assert len(out) == 1 and out[0] == line
    assert elapsed < 2.0


def test_rejects_a_nonpositive_cap() -> None:
    with pytest.raises(ValueError, match="positive"):
        LineFramer(0)


def _reference(stream: bytes, cap: int) -> list[bytes | int]:
    """What framing the whole stream at once must give (a marker shown as the cap)."""
    *complete, tail = stream.split(b"\n")
    out: list[bytes | int] = [line if len(line) <= cap else cap for line in complete]
    if len(tail) > cap:
        out.append(cap)
    elif tail:
        out.append(tail)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_any_chunking_frames_like_the_whole_stream(seed: int) -> None:
    rng = random.Random(seed)
    cap = rng.choice([1, 3, 8, 20])
    stream = b"".join(
        rng.choice([b"\n", b"\n\n", b"ab", b"x" * rng.randint(0, 30), b"\r\n", b"{}"]) for _ in range(60)
    )
    cuts = sorted(rng.sample(range(len(stream) + 1), min(len(stream) + 1, rng.randint(0, 12))))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    out = [
        item.limit if isinstance(item, StreamLimitError) else item
        for item in _feed_all(LineFramer(cap), chunks)
    ]
    assert out == _reference(stream, cap)
