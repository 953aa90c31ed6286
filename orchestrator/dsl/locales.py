"""Locales (`locales/<lang>.yml`, app-wide `agent/locales/`) and Yao's `{{ key }}` templates.

Yao flattens each locale file to dot keys (`chat.prompts.0`), adds the short codes of a region
locale (`en-us` also answers `en` and `us`), lays the assistant's messages over the global ones,
and injects `name`, `description` and `capabilities` from the package when a locale does not
define them. A string that is one key (`"General"`) or holds templates (`"{{ chat.title }}"`)
is replaced from the messages; an unknown key stays as written. Cage resolves the package's
display fields in `DEFAULT_LOCALE` at load time and keeps the tables for other locales.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

DEFAULT_LOCALE = "en-us"
_TEMPLATE = re.compile(r"\{\{\s*([^}]+?)\s*\}\}")
Messages = dict[str, str]


def flatten(messages: Mapping[str, Any], prefix: str = "") -> Messages:
    """Nested messages as dot keys: `{"chat": {"prompts": ["a"]}}` -> `{"chat.prompts.0": "a"}`."""
    out: Messages = {}
    for key, value in messages.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, list):
            out.update(flatten({str(i): v for i, v in enumerate(value)}, f"{name}."))
        elif value is not None:
            out[name] = str(value)
    return out


def with_short_codes(locales: Mapping[str, Messages]) -> dict[str, Messages]:
    """Add `en` and `us` for `en-us` (a locale of that exact name wins)."""
    out = {code.lower(): dict(messages) for code, messages in locales.items()}
    for code, messages in list(out.items()):
        for short in code.split("-")[:2] if "-" in code else ():
            out.setdefault(short, messages)
    return out


def merge(global_locales: Mapping[str, Messages], own: Mapping[str, Messages],
          injected: Mapping[str, str]) -> dict[str, Messages]:
    """The assistant's tables: global messages, then its own over them, then `injected` where unset."""
    mine = with_short_codes(own)
    out: dict[str, Messages] = {}
    for code in {*global_locales, *mine} or {DEFAULT_LOCALE}:
        merged = {**global_locales.get(code, {}), **mine.get(code, {})}
        for key, value in injected.items():
            if value:
                merged.setdefault(key, value)
        out[code] = merged
    return out


def _lookup(tables: Mapping[str, Messages], locale: str, key: str) -> str | None:
    locale = locale.lower()
    for code in (locale, *reversed(locale.split("-")[:2])) if "-" in locale else (locale,):
        table = tables.get(code)
        if table is not None and key in table:
            return table[key]
    return None


def translate(value: Any, tables: Mapping[str, Messages], locale: str = DEFAULT_LOCALE,
              _depth: int = 0) -> Any:
    """`value` (a string, or lists and dicts of them) with message keys and `{{ key }}` resolved."""
    if isinstance(value, list):
        return [translate(v, tables, locale, _depth) for v in value]
    if isinstance(value, dict):
        return {k: translate(v, tables, locale, _depth) for k, v in value.items()}
    if not isinstance(value, str) or _depth > 5:
        return value
    if "{{" not in value:
        found = _lookup(tables, locale, value.strip())
        return found if found is not None else value

    def one(match: re.Match[str]) -> str:
        found = _lookup(tables, locale, match.group(1).strip())
        return match.group(0) if found is None else str(translate(found, tables, locale, _depth + 1))

    return _TEMPLATE.sub(one, value)
