"""Keys of Yao's schema that load in Cage but do nothing, each with the reason.

Yao's loader accepts these, so a Yao application must load unchanged; but a user deserves to know
which of their settings Cage does not act on. Each key found becomes a `ConfigWarning` naming the
file, line and key path, printed by `cage validate` (exit 0, or 2 with `--strict`). A key that is
in none of Yao's schemas stays an error (a typo must not pass silently).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from orchestrator.dsl.document import Document, KeyPath, format_key_path

_NO_SEARCH = "Cage has no search pipeline (web, knowledge base, database search)"
_NO_ROBOT = "Cage has no robot pipeline"
_NO_SYSTEM_AGENT = "Cage has no such __yao system agent"

USES: Mapping[str, str] = {
    "prompt": "Cage has no prompt-writing system agent",
    "robot_prompt": _NO_ROBOT,
    "audio": "Cage does not transcribe audio for models without audio",
    "search": _NO_SEARCH,
    "fetch": "Cage has no fetch assistant; tools fetch what they need",
    "web": _NO_SEARCH,
    "keyword": _NO_SEARCH,
    "querydsl": _NO_SEARCH,
    "rerank": _NO_SEARCH,
    "db": "Yao does not read it either; Cage has no database search",
    **{
        phase: _NO_ROBOT
        for phase in ("inspiration", "goals", "tasks", "delivery", "learning", "host", "validation")
    },
}
"""`uses.<key>` in `agent.yml` and in a package."""

AGENT: Mapping[KeyPath, str] = {
    **{("uses", key): reason for key, reason in USES.items()},
    ("store", "connector"): "sessions live in Cage's own database (CAGE_DATABASE_URL)",
    ("store", "optional"): "sessions live in Cage's own database (CAGE_DATABASE_URL)",
    ("store", "expiration"): "Yao does not read it either (its key is store.ttl)",
    ("cache",): "Cage keeps no agent cache store",
    ("models",): "Cage takes model capabilities from the connector's capabilities",
    ("kb",): "Cage has no knowledge bases",
    ("search",): _NO_SEARCH,
    **{
        ("system", key): _NO_SYSTEM_AGENT
        for key in ("keyword", "querydsl", "prompt", "robot_prompt", "needsearch", "entity")
    },
}
"""`agent.yml` (or `agent/agent.yml`)."""

PACKAGE: Mapping[KeyPath, str] = {
    **{("uses", key): reason for key, reason in USES.items()},
    ("connector_options", "optional"): "a request may always pick one of connector_options.connectors",
    ("connector_options", "filters"): "Cage does not filter connector_options.connectors by capability",
    ("modes",): "Cage has no chat/task modes",
    ("default_mode",): "Cage has no chat/task modes",
    ("share",): "Cage has no teams; `public` decides who may use an API-created assistant",
    ("kb",): "Cage has no knowledge bases",
    ("db",): "Cage has no database search",
    ("workflow",): "Cage runs no workflows",
    ("search",): _NO_SEARCH,
    ("dependencies",): "Cage installs no registry packages; the MCP servers must be in the app",
    ("source",): "inline hook source is not run; Cage runs src/index.ts (or src/index.py)",
    ("hooks",): "hook functions are found by name (Create, Next) in src/index.ts, as Yao does",
    ("option",): "Yao reads only `options`; this older spelling is ignored by both",
    ("version",): "package metadata only",
}
"""An assistant's `package.yao`."""

MCP_FILE: Mapping[KeyPath, str] = {
    ("capabilities",): "Cage derives a process server's capabilities from its mappings",
    ("dependencies",): "Cage installs no registry packages",
    ("enable_sampling",): "Cage's MCP client offers no sampling",
    ("enable_roots",): "Cage's MCP client offers no roots",
    ("enable_elicitation",): "Cage's MCP client offers no elicitation",
    ("resources",): "Cage's process transport serves tools only",
    ("prompts",): "Cage's process transport serves tools only",
}
"""An `.mcp.yao` file."""

CONNECTOR: Mapping[KeyPath, str] = {
    ("options", "protocols"): "Cage picks the client from the connector's type",
    ("options", "extra_body"): "Cage does not add extra body fields to model requests",
    ("auth_mode",): "Cage sends the key the way the provider expects",
    ("supported_params",): "Cage does not read Yao's parameter table",
}
"""A `.conn.yao` file (or an inline connector in `agent.yml`)."""


class ConfigWarning(BaseModel):
    """A key that loads but has no effect (or a file Cage does not use), located like a `ConfigError`."""

    model_config = ConfigDict(frozen=True)
    file: Path
    key_path: str = ""
    line: int | None = None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else str(self.file)
        return f"{where}: {self.key_path}: {self.message}" if self.key_path else f"{where}: {self.message}"


def warning(doc: Document, path: KeyPath, message: str) -> ConfigWarning:
    return ConfigWarning(
        file=doc.file,
        key_path=format_key_path(path),
        line=doc.line_for(path) if path else None,
        message=message,
    )


def _present(data: Any, path: KeyPath) -> bool:
    node = data
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return node is not None and node != "" and node != {} and node != []


def inert_keys(doc: Document, table: Mapping[KeyPath, str], prefix: KeyPath = ()) -> list[ConfigWarning]:
    """A warning for every key of `table` set in `doc` (under `prefix`), in file order."""
    node: Any = doc.value
    for part in prefix:
        node = node.get(part) if isinstance(node, dict) else None
    found = [
        warning(doc, (*prefix, *path), f"has no effect in Cage: {reason}")
        for path, reason in table.items()
        if _present(node, path)
    ]
    return sorted(found, key=lambda w: (w.line or 0, w.key_path))
