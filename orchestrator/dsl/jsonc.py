"""JSONC, the format of `.yao` files: JSON with `//` and `/* */` comments and trailing commas.

`parse_jsonc` returns a `Document` whose line index maps every object key and array element to
the line it starts on, so later validation errors can point at the right line. Syntax errors are
`ConfigError`s naming the file, the line and the column. Duplicate keys are errors too (Go's
decoder would silently keep the last one, which hides typos).
"""

from __future__ import annotations

import bisect
import json
import re
from pathlib import Path
from typing import Any

from orchestrator.dsl.document import Document, KeyPath
from orchestrator.errors import ConfigError

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None}


def parse_jsonc(text: str, *, file: Path | str) -> Document:
    """Parse JSONC text into a `Document`.

    Raises:
        ConfigError: on a syntax error, with the line and column in the message.
    """
    parser = _Parser(text, Path(file))
    value = parser.document()
    return Document(file=Path(file), value=value, lines=parser.lines)


class _Parser:
    def __init__(self, text: str, file: Path) -> None:
        self.text = text.removeprefix("\ufeff")
        self.file = file
        self.pos = 0
        self.lines: dict[KeyPath, int] = {}
        self._starts = [0] + [m.end() for m in re.finditer(r"\n", self.text)]

    # -- positions and errors ------------------------------------------------------------------
    def _line_col(self, pos: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._starts, pos)
        return line, pos - self._starts[line - 1] + 1

    def _error(self, message: str, pos: int | None = None) -> ConfigError:
        line, col = self._line_col(self.pos if pos is None else pos)
        return ConfigError(f"invalid JSONC: {message} (column {col})", file=self.file, line=line)

    def _found(self) -> str:
        if self.pos >= len(self.text):
            return "end of file"
        return repr(self.text[self.pos])

    # -- scanning ------------------------------------------------------------------------------
    def _skip(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            ch = text[self.pos]
            if ch in " \t\r\n":
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self._error("unterminated /* comment")
                self.pos = end + 2
            else:
                return

    def document(self) -> Any:
        self._skip()
        if self.pos >= len(self.text):
            raise self._error("the file is empty")
        self.lines[()] = self._line_col(self.pos)[0]
        value = self._value(())
        self._skip()
        if self.pos < len(self.text):
            raise self._error(f"unexpected {self._found()} after the top-level value")
        return value

    def _value(self, path: KeyPath) -> Any:
        self._skip()
        if self.pos >= len(self.text):
            raise self._error("unexpected end of file, expected a value")
        ch = self.text[self.pos]
        if ch == "{":
            return self._object(path)
        if ch == "[":
            return self._array(path)
        if ch == '"':
            return self._string()
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return literal
        m = _NUMBER.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            raw = m.group()
            return float(raw) if any(c in raw for c in ".eE") else int(raw)
        raise self._error(f"unexpected {self._found()}, expected a value")

    def _string(self) -> str:
        start = self.pos
        i = start + 1
        text, n = self.text, len(self.text)
        while i < n:
            ch = text[i]
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                break
            if ch == "\n":
                raise self._error("unterminated string", start)
            i += 1
        else:
            raise self._error("unterminated string", start)
        try:
            value = json.loads(text[start : i + 1])
        except json.JSONDecodeError as exc:
            raise self._error(f"bad string: {exc.msg}", start + exc.pos) from exc
        self.pos = i + 1
        return str(value)

    def _object(self, path: KeyPath) -> dict[str, Any]:
        self.pos += 1
        out: dict[str, Any] = {}
        while True:
            self._skip()
            if self.text.startswith("}", self.pos):
                self.pos += 1
                return out
            if not self.text.startswith('"', self.pos):
                raise self._error(f"expected a quoted key or '}}', found {self._found()}")
            key_pos = self.pos
            key = self._string()
            if key in out:
                raise self._error(f"duplicate key {key!r}", key_pos)
            self.lines[(*path, key)] = self._line_col(key_pos)[0]
            self._skip()
            if not self.text.startswith(":", self.pos):
                raise self._error(f"expected ':' after key {key!r}, found {self._found()}")
            self.pos += 1
            out[key] = self._value((*path, key))
            self._skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif not self.text.startswith("}", self.pos):
                raise self._error(f"expected ',' or '}}', found {self._found()}")

    def _array(self, path: KeyPath) -> list[Any]:
        self.pos += 1
        out: list[Any] = []
        while True:
            self._skip()
            if self.text.startswith("]", self.pos):
                self.pos += 1
                return out
            self.lines[(*path, len(out))] = self._line_col(self.pos)[0]
            out.append(self._value((*path, len(out))))
            self._skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif not self.text.startswith("]", self.pos):
                raise self._error(f"expected ',' or ']', found {self._found()}")
