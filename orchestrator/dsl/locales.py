"""Locales (`locales/<lang>.yml`, app-wide `agent/locales/`) and Yao's `{{ key }}` templates.

Yao flattens each locale file to dot keys (`chat.prompts.0`), adds the short codes of a region
locale (`en-us` also answers `en` and `us`), lays the assistant's messages over the global ones,
and injects `name`, `description` and `capabilities` from the package when a locale does not
define them. A string that is one key (`"General"`) or holds templates (`"{{ chat.title }}"`)
is replaced from the messages; an unknown key stays as written. Cage resolves the package's
display fields in `DEFAULT_LOCALE` at load time and keeps the tables for other locales: a request's
locale (its `locale` field, else `Accept-Language`, else `DEFAULT_LOCALE`) picks the table its
views (`display_field`) and its prompts (`localize_prompts`) are resolved in. A key the request's
locale lacks comes from `DEFAULT_LOCALE`'s table, so an unknown locale reads as the default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.dsl.package import Prompt

DEFAULT_LOCALE = "en-us"
_TEMPLATE = re.compile(r"\{\{\s*([^}]+?)\s*\}\}")
_TAG = re.compile(r"[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*")
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


def merge(
    global_locales: Mapping[str, Messages], own: Mapping[str, Messages], injected: Mapping[str, str]
) -> dict[str, Messages]:
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


def request_locale(explicit: str | None = None, accept_language: str | None = None) -> str:
    """The locale a request asks for, lower case: `explicit` (a request's `locale`), else the
    heaviest tag of an `Accept-Language` header (`zh-CN,zh;q=0.9` -> `zh-cn`), else
    `DEFAULT_LOCALE`. `_` reads as `-`; `*` and malformed tags are skipped."""
    if explicit and _TAG.fullmatch(explicit.strip().replace("_", "-")):
        return explicit.strip().replace("_", "-").lower()
    ranked: list[tuple[float, int, str]] = []
    for i, item in enumerate((accept_language or "").split(",")):
        tag, _, params = item.strip().partition(";")
        tag = tag.strip().replace("_", "-")
        weight = 1.0
        if params.strip().startswith("q="):
            try:
                weight = float(params.strip()[2:])
            except ValueError:
                continue
        if weight > 0 and _TAG.fullmatch(tag):
            ranked.append((-weight, i, tag.lower()))
    return min(ranked)[2] if ranked else DEFAULT_LOCALE


def _codes(locale: str) -> tuple[str, ...]:
    """`zh-cn` -> `zh-cn`, `cn`, `zh`, then the default locale's codes."""
    out: list[str] = []
    for code in (locale.lower(), DEFAULT_LOCALE):
        for one in (code, *reversed(code.split("-")[:2])) if "-" in code else (code,):
            if one not in out:
                out.append(one)
    return tuple(out)


def _lookup(tables: Mapping[str, Messages], locale: str, key: str) -> str | None:
    for code in _codes(locale):
        table = tables.get(code)
        if table is not None and key in table:
            return table[key]
    return None


def translate(
    value: Any, tables: Mapping[str, Messages], locale: str = DEFAULT_LOCALE, _depth: int = 0
) -> Any:
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


def display_field(tables: Mapping[str, Messages], key: str, value: str, locale: str) -> str:
    """An assistant's `name` or `description` in `locale`: the locale's own `key` message (a
    `name:` in `locales/zh-cn.yml`), else `value` (the package's, as written), with message keys
    and `{{ key }}` templates resolved in that locale."""
    own = _lookup(tables, locale, key)
    return str(translate(own if own is not None else value, tables, locale))


def localize_prompts(
    prompts: Sequence[Prompt], tables: Mapping[str, Messages], locale: str
) -> tuple[Prompt, ...]:
    """`prompts` with message keys and `{{ key }}` templates in their content resolved in `locale`."""
    return tuple(
        p.model_copy(update={"content": str(translate(p.content, tables, locale))}) if p.content else p
        for p in prompts
    )
