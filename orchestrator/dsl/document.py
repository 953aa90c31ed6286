"""A parsed configuration file: its value plus the line of every key and element in it.

The loader keeps the line index so that an error found later (by pydantic, by the connector
resolution, ...) can still name the line of the key at fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KeyPath = tuple[str | int, ...]
"""A path into a document: object keys as `str`, array indices as `int`."""


def format_key_path(path: KeyPath) -> str:
    """`("computer", "ports", 1)` -> `computer.ports[1]`; `(0, "role")` -> `[0].role`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


@dataclass(frozen=True)
class Document:
    """One file's parsed value and where each key path starts (1-based lines)."""

    file: Path
    """The file, relative to the application directory (used in error messages)."""
    value: Any
    lines: Mapping[KeyPath, int] = field(default_factory=dict)

    def line_for(self, path: KeyPath) -> int | None:
        """Line of `path`, or of its longest prefix that exists in the file."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None

    def data_path(self, loc: tuple[Any, ...], prefix: KeyPath = ()) -> KeyPath:
        """Map a pydantic error location onto a path that exists in this document.

        Pydantic adds entries that are not keys (union member tags such as `exec` in
        `prepare.0.exec.cmd`, `function-before[...]`); they are dropped. The last entry is
        kept even when it is missing from the data, since it names the missing key.
        """
        node = self._at(prefix)
        out: list[str | int] = list(prefix)
        for i, part in enumerate(loc):
            last = i == len(loc) - 1
            in_dict = isinstance(node, dict) and isinstance(part, str) and part in node
            in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
            if in_dict or in_list:
                node = node[part]
                out.append(part)
            elif last and isinstance(part, str | int) and not _is_tag(part):
                out.append(part)
                node = None
            # anything else is a union tag or a key the model added itself: skip it
        return tuple(out)

    def _at(self, path: KeyPath) -> Any:
        node = self.value
        for part in path:
            if isinstance(node, dict) and isinstance(part, str):
                node = node.get(part)
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                node = node[part]
            else:
                return None
        return node


def _is_tag(part: str | int) -> bool:
    return isinstance(part, str) and ("[" in part or part[:1].isupper())
