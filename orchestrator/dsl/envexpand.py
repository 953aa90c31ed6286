"""`$ENV.NAME` expansion, where Yao does it (a whole string value that starts with `$ENV.`).

Expanded in: connector options, `sandbox.yao` `environment`, the VNC password, secret values,
MCP server settings and a package's `connector`. A missing variable is a `ConfigError` naming the
file, the key path and the variable, never a value. Values expanded into key or secret fields are
registered with the redactor so they are masked wherever they show up later.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from orchestrator.dsl.document import Document, KeyPath, format_key_path
from orchestrator.errors import ConfigError
from orchestrator.redaction import register_secret

ENV_PREFIX = "$ENV."
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_reference(value: object) -> str | None:
    """The variable name when `value` is `"$ENV.NAME"`, else None."""
    if isinstance(value, str) and value.startswith(ENV_PREFIX):
        return value[len(ENV_PREFIX) :]
    return None


class EnvExpander:
    """Expands `$ENV.NAME` strings found in one document against one environment."""

    def __init__(self, environ: Mapping[str, str], doc: Document) -> None:
        self._environ = environ
        self._doc = doc

    def expand(self, value: Any, path: KeyPath, *, secret: bool = False) -> Any:
        """`value` with `$ENV.NAME` replaced; other values are returned unchanged.

        Raises:
            ConfigError: the reference is malformed or the variable is not set.
        """
        name = env_reference(value)
        if name is None:
            if secret and isinstance(value, str):
                register_secret(value)
            return value
        if not _NAME.fullmatch(name):
            raise self._error(path, f"malformed reference {ENV_PREFIX}{name!s}: expected $ENV.NAME")
        found = self._environ.get(name)
        if found is None:
            raise self._error(path, f"environment variable {name} is not set")
        if secret:
            register_secret(found)
        return found

    def expand_in(self, data: Any, path: KeyPath, *, secret: bool = False) -> Any:
        """Expand the string at `path` inside `data` (a dict tree) in place; a no-op when absent."""
        *parents, last = path
        node = data
        for part in parents:
            if not isinstance(node, dict) or part not in node:
                return data
            node = node[part]
        if isinstance(node, dict) and last in node:
            node[last] = self.expand(node[last], path, secret=secret)
        return data

    def expand_values(self, data: Any, path: KeyPath, *, secret: bool = False) -> None:
        """Expand every string value of the mapping at `path` (e.g. `environment`) in place."""
        node = data
        for part in path:
            if not isinstance(node, dict) or part not in node:
                return
            node = node[part]
        if isinstance(node, dict):
            for key in list(node):
                node[key] = self.expand(node[key], (*path, key), secret=secret)

    def _error(self, path: KeyPath, message: str) -> ConfigError:
        return ConfigError(
            message, file=self._doc.file, key_path=format_key_path(path), line=self._doc.line_for(path)
        )
