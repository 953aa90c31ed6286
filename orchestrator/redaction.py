"""Masks secrets (API keys, tokens, passwords) in text and structured log data.

Two mechanisms, both always on:
* values registered with `register_secret()` (connector keys, sandbox secrets, API keys) are
  replaced wherever they appear;
* well-known shapes are masked even when nobody registered them: `sk-...`/`sk-ant-...` keys,
  `Bearer <token>`, and `NAME=value` / `"name": "value"` pairs whose name says key, token,
  secret or password.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

MASK = "***"
_MIN_SECRET_LEN = 6

_SENSITIVE_NAME = (
    r"[A-Za-z0-9_.-]*(?:api[_-]?key|apikey|token|secret|password|passwd|authorization|credential)"
    r"[A-Za-z0-9_.-]*"
)
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{8,}"), MASK),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=\-]{6,}"), rf"\1 {MASK}"),
    # Basic credentials are base64 of `user:password`: 12+ characters with a digit, `+`, `/`, `=`
    # or a capital past the first letter, so prose ("Basic Message Types") is left alone.
    (
        re.compile(
            r"(?i)\b(basic)\s+(?-i:(?=[A-Za-z0-9+/]*[0-9+/=]|[A-Za-z0-9+/]+[A-Z]))[A-Za-z0-9+/]{12,}={0,2}"
        ),
        rf"\1 {MASK}",
    ),
    (re.compile(rf"(?i)\b({_SENSITIVE_NAME})(\s*[=:]\s*)(?!\*\*\*)([^\s,;'\"&]+)"), rf"\1\2{MASK}"),
    (re.compile(rf"(?i)(\"{_SENSITIVE_NAME}\"\s*:\s*\")(?!\*\*\*)[^\"]*(\")"), rf"\1{MASK}\2"),
)
_SENSITIVE_KEY = re.compile(rf"(?i)^{_SENSITIVE_NAME}$")
_TRIGGERS = ("sk-", "bearer", "basic", "key", "token", "secret", "passw", "authorization", "credential")
"""Every shape pattern above needs one of these words (lower-cased): text without any skips the
patterns. Most event text has none, and redaction runs on every event, so this is the common path
(substring checks are C loops; one alternation regex over the text costs fifty times more)."""

_lock = threading.Lock()
_secrets: set[str] = set()
_secret_re: re.Pattern[str] | None = None


def register_secret(value: str | None) -> None:
    """Remember a secret value so that `redact` masks it wherever it shows up."""
    global _secret_re
    if not value or len(value) < _MIN_SECRET_LEN:
        return
    with _lock:
        if value in _secrets:
            return
        _secrets.add(value)
        ordered = sorted(_secrets, key=len, reverse=True)
        _secret_re = re.compile("|".join(re.escape(s) for s in ordered))


def redact(text: str) -> str:
    """Return `text` with every registered secret and every secret-looking token masked."""
    if not text:
        return text
    pattern = _secret_re
    if pattern is not None:
        text = pattern.sub(MASK, text)
    lowered = text.lower()
    if not any(word in lowered for word in _TRIGGERS):
        return text
    for regex, repl in _PATTERNS:
        text = regex.sub(repl, text)
    return text


def is_sensitive_key(name: str) -> bool:
    """True for mapping keys whose values must never be shown (`api_key`, `GITHUB_TOKEN`, ...)."""
    return bool(_SENSITIVE_KEY.match(name))


def redact_value(value: Any) -> Any:
    """Recursively redact strings inside dicts, lists and tuples; mask values of sensitive keys."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {
            k: (
                MASK
                if isinstance(k, str) and is_sensitive_key(k) and v not in (None, "")
                else redact_value(v)
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact_value(v) for v in value)
    return value


def redact_json(value: Any) -> Any:
    """Redact every string inside JSON data (keys and non-strings untouched, so a tool's input
    keeps its shape: `{"max_tokens": 5}` stays a number)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {k: redact_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_json(v) for v in value)
    return value


def redact_model(model: M) -> M:
    """`model` with every string field (nested models and JSON fields included) redacted; the same
    object when nothing needed masking, so the common case costs no copy."""
    changed: dict[str, Any] = {}
    for name, value in model.__dict__.items():
        if isinstance(value, str):
            masked: Any = redact(value)
        elif isinstance(value, BaseModel):
            masked = redact_model(value)
        elif isinstance(value, Mapping | list | tuple):
            masked = redact_json(value)
        else:
            continue
        if masked != value:
            changed[name] = masked
    return model.model_copy(update=changed) if changed else model
