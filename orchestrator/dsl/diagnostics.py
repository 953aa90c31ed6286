"""Turn pydantic `ValidationError`s into readable `ConfigError`s that name file, key path and line.

This is the loader boundary of R9: pydantic's errors never leave `orchestrator.dsl`. Messages
carry no documentation URLs and never the offending input (it may be a secret); they also pass
through the redactor as a last guard.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from orchestrator.dsl.document import Document, KeyPath, format_key_path
from orchestrator.errors import ConfigError, ConfigErrors
from orchestrator.redaction import redact

M = TypeVar("M", bound=BaseModel)

_MESSAGES = {
    "extra_forbidden": "unknown key",
    "missing": "required key is missing",
}
_PREFIXES = ("Value error, ", "Assertion failed, ")


def error_message(err: Any) -> str:
    """A pydantic error dict's message, without pydantic's prefixes and never with the input."""
    kind = str(err.get("type", ""))
    if kind in _MESSAGES:
        return _MESSAGES[kind]
    msg = str(err.get("msg", "invalid value"))
    for prefix in _PREFIXES:
        msg = msg.removeprefix(prefix)
    return redact(msg)


def config_errors(exc: ValidationError, doc: Document, prefix: KeyPath = ()) -> ConfigError:
    """One `ConfigError`, or `ConfigErrors` when pydantic found several problems.

    `prefix` is where the validated value sits in `doc` (e.g. `("sandbox",)` for the sandbox
    embedded in `package.yao`).
    """
    found: list[ConfigError] = []
    seen: set[tuple[str, str]] = set()
    for err in exc.errors(include_url=False, include_input=False):
        path = doc.data_path(tuple(err["loc"]), prefix)
        key_path, message = format_key_path(path), error_message(err)
        if (key_path, message) in seen:
            continue
        seen.add((key_path, message))
        found.append(ConfigError(message, file=doc.file, key_path=key_path, line=doc.line_for(path)))
    if not found:  # pragma: no cover - pydantic always reports at least one error
        return ConfigError("invalid configuration", file=doc.file)
    return found[0] if len(found) == 1 else ConfigErrors(found)


def validate(model: type[M], data: Any, doc: Document, prefix: KeyPath = (), **context: Any) -> M:
    """`model.model_validate(data)`, with errors converted to `ConfigError`s located in `doc`.

    Raises:
        ConfigError: the data does not fit the model (`ConfigErrors` for several problems).
    """
    try:
        return model.model_validate(data, context=context or None)
    except ValidationError as exc:
        # `from None`: pydantic's own text repeats the input, which may be a secret value.
        raise config_errors(exc, doc, prefix) from None


def flatten(error: ConfigError) -> list[ConfigError]:
    """The single errors inside a `ConfigError` (itself, or every error of a `ConfigErrors`)."""
    return list(error.errors) if isinstance(error, ConfigErrors) else [error]
