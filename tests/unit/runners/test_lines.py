"""`json_object`: a CLI line read as one JSON object, exactly as `json.loads` would read it."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from typing import Any

import pytest

from runners.lines import json_object, loads


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"text","text":"héllo ☃ \\u00e9\\n"}',
        '  {"a": 1, "a": 2}  \r',
        '{"big": 123456789012345678901234567890, "neg": -98765432109876543210}',
        '{"lone": "\\ud800 and \\udfff"}',
        '{"f": [1.0, -0.0, 1e-7, 3.141592653589793, 1E2, 0.1]}',
        '{"nested": {"deep": [[[{"x": null, "t": true, "f": false}]]]}}',
        '{"deep": ' + "[" * 500 + "]" * 500 + "}",
    ],
)
def test_reads_like_the_standard_library(line: str) -> None:
    assert json_object(line, runner="test") == json.loads(line)


def test_nan_and_infinity_read_like_the_standard_library() -> None:
    value = json_object('{"n": NaN, "i": Infinity, "m": -Infinity}', runner="test")
    assert value is not None
    assert math.isnan(value["n"]) and value["i"] == math.inf and value["m"] == -math.inf


@pytest.mark.parametrize(
    "line",
    [
        "",
        "   ",
        "Loading banner…",
        "[1, 2]",
        '"text"',
        "42",
        "{broken",
        "[" * 100_000,
        '{"deep": ' + "[" * 5000 + "]" * 5000 + "}",
    ],
)
def test_blank_noise_and_non_objects_are_skipped(line: str) -> None:
    assert json_object(line, runner="test") is None


def _read(reader: Callable[[str], Any], text: str) -> tuple[str, str]:
    try:
        return "value", repr(reader(text))
    except (ValueError, RecursionError) as exc:
        return "error", type(exc).__name__


def test_random_strings_and_numbers_read_like_the_standard_library() -> None:
    rng = random.Random(14)
    escapes = [
        r"\ud800",
        r"\udfff",
        r"\ud83d",
        r"\ude00",
        r"\u0041",
        r"\n",
        r"\"",
        "\\\\",
        r"\/",
        r"\b",
        "\t",
    ]
    escapes += ["a", "é", "😀", r"\uffff", r"\u0000", r"\x", "\\", r"\u12", "\x00", "\x1f", "\x7f"]
    for _ in range(3000):
        body = "".join(rng.choice(escapes) for _ in range(rng.randint(0, 6)))
        number = (
            rng.choice(["-", ""])
            + str(rng.randint(0, 9))
            + "".join(rng.choices("0123456789", k=rng.randint(0, 30)))
        )
        number += rng.choice(["", ".5", ".12345678901234567890", "e-330", "e309", "E+2", "."])
        text = f'{{"s": "{body}", "n": {number}, "{body}": [{number}]}}'
        assert _read(loads, text) == _read(json.loads, text), text
