"""A small TOML writer for the generated `config.toml`: strings, numbers, booleans, lists and
inline tables as values, and `[dotted.table]` headers. Enough for codex's config, nothing more.

Strings are written as TOML basic strings. `json.dumps(..., ensure_ascii=False)` produces exactly
the escapes TOML accepts (`\\"`, `\\\\`, `\\n`, `\\uXXXX` for other control characters), and
leaves every other character as it is, so no surrogate pairs can appear.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

TomlValue = str | int | float | bool | Sequence["TomlValue"] | Mapping[str, "TomlValue"]
"""What a key may hold."""

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def key(name: str) -> str:
    """A key as TOML spells it: bare when it can be, quoted otherwise (`"a.b"`)."""
    return name if _BARE_KEY.match(name) else json.dumps(name, ensure_ascii=False)


def value(item: TomlValue) -> str:
    """One value in TOML syntax (mappings become inline tables)."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int | float):
        return repr(item)
    if isinstance(item, str):
        return json.dumps(item, ensure_ascii=False)
    if isinstance(item, Mapping):
        inner = ", ".join(f"{key(k)} = {value(v)}" for k, v in item.items())
        return "{ " + inner + " }" if inner else "{}"
    return "[" + ", ".join(value(v) for v in item) + "]"


def table(path: Sequence[str], entries: Mapping[str, TomlValue]) -> str:
    """A `[path]` table with its `key = value` lines; the root table when `path` is empty."""
    lines = [f"[{'.'.join(key(p) for p in path)}]"] if path else []
    lines += [f"{key(k)} = {value(v)}" for k, v in entries.items()]
    return "\n".join(lines) + "\n"
