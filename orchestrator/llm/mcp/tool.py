"""`McpTool`: one tool of a connected MCP server, as a `Tool` for the loop engine.

Names are `<server>__<tool>` (characters other than letters, digits, `_` and `-` become `_`;
names longer than the 64 characters providers accept are cut and end in a short hash), so tools
of different servers never collide and a tool keeps its name whichever other servers a turn
adds. Arguments are checked against the server's input schema before the call: a violation is a
non-retryable failure that never reaches the server.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

import mcp.types as mt
import structlog
from jsonschema import SchemaError, validators  # type: ignore[import-untyped]
from jsonschema.exceptions import best_match  # type: ignore[import-untyped]
from pydantic import JsonValue

from orchestrator.llm.mcp.connection import McpConnection
from orchestrator.llm.mcp.retries import failure
from orchestrator.llm.tools.base import ToolContext, ToolResult

log = structlog.get_logger(__name__)

MAX_NAME = 64
SEPARATOR = "__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server_id: str, tool: str) -> str:
    """The engine-side name of `tool` on `server_id`: `<server>__<tool>`, provider-safe."""
    name = f"{_UNSAFE.sub('_', server_id)}{SEPARATOR}{_UNSAFE.sub('_', tool)}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(f"{server_id}\0{tool}".encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


class McpTool:
    """A remote tool; `run` never raises (failures are error results tagged for the retry policy)."""

    def __init__(self, connection: McpConnection, remote: mt.Tool, *, name: str | None = None) -> None:
        self._connection = connection
        self.remote = remote
        self.server_id = connection.server_id
        self._name = name or tool_name(connection.server_id, remote.name)
        schema = dict(remote.input_schema)
        schema.pop("title", None)
        schema.setdefault("type", "object")
        self._schema = schema
        self._validator = _validator(schema, self._name)

    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str:
        return self.remote.description or self.remote.title or f"{self.remote.name} ({self.server_id})"

    @property
    def read_only(self) -> bool:
        hints = self.remote.annotations
        return bool(hints is not None and hints.read_only_hint)

    @property
    def input_schema(self) -> dict[str, Any]:
        return self._schema

    async def run(self, args: Mapping[str, JsonValue], ctx: ToolContext) -> ToolResult:
        problem = self.check(args)
        if problem is not None:
            message = f"invalid arguments for {self.name}: {problem}"
            return failure("schema", message, server=self.server_id, retryable=False)
        return await self._connection.call(self.remote.name, args)

    def check(self, args: Mapping[str, JsonValue]) -> str | None:
        """The first way `args` break the input schema, or None when they fit."""
        if self._validator is None:
            return None
        error = best_match(self._validator.iter_errors(dict(args)))
        if error is None:
            return None
        where = ".".join(str(p) for p in error.absolute_path) or "arguments"
        return f"{where}: {error.message}"


def _validator(schema: dict[str, Any], name: str) -> Any:
    """A compiled validator, or None when the server's schema is itself invalid (the server decides)."""
    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        log.warning("mcp.bad_input_schema", tool=name, error=str(exc.message))
        return None
    return cls(schema)
