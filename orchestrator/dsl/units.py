"""Yao's human units: memory sizes (`2GB`, `512m`, base 1024) and Go durations (`30m`, `1h30m`)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

_MEM = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_MEM_FACTOR = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_DUR_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h|d)")
_DUR_FACTOR = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}


def parse_memory(value: Any) -> int:
    """`"4GB"`, `"4g"`, `"512MB"`, `"1024K"`, `"1T"`, `2147483648`, `"1.5G"` -> bytes (base 1024)."""
    if isinstance(value, bool):
        raise ValueError("memory must be a size such as '2GB' or '512m', not a boolean")
    if isinstance(value, int | float):
        if value <= 0:
            raise ValueError(f"memory must be positive, got {value}")
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f"memory must be a size such as '2GB' or '512m', got {type(value).__name__}")
    m = _MEM.match(value)
    if not m or (m.group(3) and m.group(3).lower() not in ("b", "ib")):
        raise ValueError(f"invalid memory size {value!r}: use a number with K, M, G or T ('2GB', '512m')")
    size = int(float(m.group(1)) * _MEM_FACTOR[m.group(2).lower()])
    if size <= 0:
        raise ValueError(f"memory must be positive, got {value!r}")
    return size


def parse_duration(value: Any) -> timedelta:
    """Go duration strings (`"30m"`, `"1h30m"`, `"500ms"`, `"2s"`) or plain seconds -> timedelta."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError("duration must be a string such as '30m' or a number of seconds")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"duration must not be negative, got {value}")
        return timedelta(seconds=value)
    if not isinstance(value, str):
        raise ValueError(f"duration must be a string such as '30m', got {type(value).__name__}")
    text = value.strip()
    if text in ("0", ""):
        return timedelta(0)
    pos, total = 0, 0.0
    for m in _DUR_PART.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _DUR_FACTOR[m.group(2)]
        pos = m.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"invalid duration {value!r}: use Go syntax such as '30s', '10m', '1h30m'")
    return timedelta(seconds=total)


def format_duration(value: timedelta) -> str:
    """timedelta -> the shortest Go-style string (`"1h30m"`, `"45s"`, `"250ms"`)."""
    ms = round(value.total_seconds() * 1000)
    if ms == 0:
        return "0s"
    if ms % 1000:
        return f"{ms}ms"
    secs = ms // 1000
    out = ""
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if secs >= size:
            out += f"{secs // size}{unit}"
            secs %= size
    return out


MemoryBytes = Annotated[
    int,
    BeforeValidator(parse_memory),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": r"^\d+(\.\d+)?\s*[kmgtKMGT]?(i?[bB])?$"},
                {"type": "integer", "minimum": 1},
            ],
            "description": "Size in bytes or with a base-1024 unit: 2GB, 512m, 1024K.",
        }
    ),
]
"""Bytes; accepts Yao's size strings."""

Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h|d))+$|^0$"},
                {"type": "number", "minimum": 0},
            ],
            "description": "Go duration such as 30s, 10m, 1h30m, or seconds.",
        }
    ),
]
"""A timedelta; accepts Go duration strings and seconds; serialises back to Go syntax."""
