"""Model connectors: `connectors/<id>.conn.yao` files and inline `connectors:` in `agent.yml`.

Yao's shape: `{"label", "type": "openai" | "anthropic", "options": {"model", "key", "host",
"proxy"?, ...}}`. Ids are derived as Yao derives them (`file_id`): a file in a sub-folder gets a
dotted id and dots inside names become `_` (`connectors/claude/sonnet-3.5.conn.yao` ->
`claude.sonnet-3_5`). Yao's non-model connectors (`mysql`, `redis`, `mongo`, ...) load as unusable
entries with a warning: Cage has nothing to connect them to. A connector that fails to load
(typically a missing `$ENV` variable) is an error
for that connector only: `ConnectorTable.get` raises the stored `ConfigError` when it is used.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from orchestrator.attribute_docs import describe_fields
from orchestrator.dsl.diagnostics import validate
from orchestrator.dsl.document import Document, KeyPath, format_key_path
from orchestrator.dsl.envexpand import EnvExpander
from orchestrator.dsl.spec_table import SpecTable
from orchestrator.dsl.units import Duration
from orchestrator.errors import ConfigError

_STRICT = ConfigDict(extra="forbid", frozen=True, json_schema_extra=describe_fields)
CONNECTOR_SUFFIX = ".conn.yao"
CONNECTOR_SUFFIXES = (".conn.yao", ".conn.jsonc", ".conn.json")
NON_MODEL_TYPES = frozenset(
    {"mysql", "sqlite", "sqlite3", "postgres", "hdb", "redis", "mongo", "moapi", "fastembed", "disabled"}
)
"""Yao connector types that are not chat models (databases, stores, embeddings)."""


def file_id(rel_path: str, suffixes: tuple[str, ...]) -> str:
    """Yao's id of a DSL file relative to its root folder (gou `share.SpecName`).

    `claude/sonnet-3.5.conn.yao` -> `claude.sonnet-3_5`; `a.b/c.conn.yao` -> `a_b.c`.
    """
    parts = rel_path.split("/")
    name = parts[-1]
    for suffix in suffixes:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return ".".join([*(p.replace(".", "_") for p in parts[:-1]), name.replace(".", "_")])


class ConnectorType(enum.StrEnum):
    OPENAI = "openai"
    ANTHROPIC = "anthropic"


DEFAULT_HOSTS = {
    ConnectorType.OPENAI: "https://api.openai.com",
    ConnectorType.ANTHROPIC: "https://api.anthropic.com",
}


class ThinkingConfig(BaseModel):
    """Extended thinking: `{"type": "enabled", "budget_tokens": 10000}` or `{"type": "disabled"}`."""

    model_config = _STRICT
    type: Literal["enabled", "disabled"] = "enabled"
    budget_tokens: int | None = Field(default=None, ge=1)


class Capabilities(BaseModel):
    """What the model can do (Yao's connector `capabilities`)."""

    model_config = _STRICT
    vision: bool | str = False
    """`true`, or the vision format name (`openai`, `claude`)."""
    audio: bool = False
    tool_calls: bool = True
    reasoning: bool = False
    streaming: bool = True
    json_mode: bool = Field(default=True, alias="json")
    multimodal: bool = False
    temperature_adjustable: bool = True
    stt: bool = False
    embedding: bool = False
    image_generation: bool = False
    max_input_tokens: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)


class ConnectorOptions(BaseModel):
    """`options` of a connector file, before `$ENV.` expansion is applied to its strings."""

    model_config = _STRICT
    model: str = ""
    key: str = ""
    """API key; usually `$ENV.NAME`. Never logged."""
    host: str = ""
    """API root, e.g. `https://api.anthropic.com`; clients append their own paths."""
    proxy: str = ""
    """Deprecated Yao spelling of `host`."""
    azure: bool | Literal["true", "false"] = False
    version: str = ""
    """Anthropic API version header (default `2023-06-01`)."""
    organization: str = ""
    timeout: Duration | None = None
    """Per-request timeout (`60s`, `2m`)."""
    max_retries: int | None = Field(default=None, ge=0, le=20)
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    thinking: ThinkingConfig | None = None
    capabilities: Capabilities | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra request headers; values support `$ENV.` and are treated as secrets."""
    protocols: tuple[str, ...] = ()
    """Yao: wire protocols the endpoint speaks; Cage picks the client from `type`."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Yao: extra request body fields; not sent by Cage."""


class ConnectorFile(BaseModel):
    """A whole `<id>.conn.yao` file (or one entry of `agent.yml` `connectors:`)."""

    model_config = _STRICT
    type: ConnectorType
    label: str = ""
    name: str = ""
    description: str = ""
    tags: tuple[str, ...] = ()
    readonly: bool = False
    builtin: bool = False
    sort: int = 0
    version: str = ""
    options: ConnectorOptions = ConnectorOptions()
    auth_mode: str = ""
    """Yao's authentication mode; Cage sends the key as the provider expects."""
    supported_params: dict[str, Any] = Field(default_factory=dict)
    """Yao's parameter capability table; not read by Cage."""


class ConnectorSpec(BaseModel):
    """A usable model connector. `key` is a `SecretStr`: masked in `repr` and dumps."""

    model_config = _STRICT
    id: str
    label: str
    type: ConnectorType
    model: str
    base_url: str
    """`host` (or `proxy`, or the provider default) without trailing `/`; clients append their paths."""
    key: SecretStr = Field(default=SecretStr(""), repr=False)
    api_version: str = ""
    organization: str = ""
    azure: bool = False
    timeout: timedelta | None = None
    max_retries: int | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    thinking: ThinkingConfig | None = None
    capabilities: Capabilities | None = None
    headers: dict[str, SecretStr] = Field(default_factory=dict, repr=False)

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        return v.rstrip("/")


def build_connector(
    conn_id: str, doc: Document, *, environ: Mapping[str, str], prefix: KeyPath = ()
) -> ConnectorSpec:
    """Validate one connector definition found at `prefix` in `doc` and expand its `$ENV.` values.

    Raises:
        ConfigError: invalid keys, or a `$ENV` variable that is not set.
    """
    root = copy.deepcopy(doc.value)
    node: Any = root
    for part in prefix:
        node = node[part]
    raw = validate(ConnectorFile, node, doc, prefix)
    expander = EnvExpander(environ, doc)
    strings: dict[str, str] = {}
    for name in ("model", "key", "host", "proxy", "version", "organization"):
        value = getattr(raw.options, name)
        strings[name] = expander.expand(value, (*prefix, "options", name), secret=name == "key")
    headers = {
        name: SecretStr(expander.expand(value, (*prefix, "options", "headers", name), secret=True))
        for name, value in raw.options.headers.items()
    }
    azure = raw.options.azure in (True, "true")
    host = strings["host"] or strings["proxy"] or DEFAULT_HOSTS[raw.type]
    if not host.startswith(("http://", "https://")):
        where = (*prefix, "options", "host" if strings["host"] else "proxy")
        raise ConfigError(
            "host must start with http:// or https://",
            file=doc.file,
            key_path=format_key_path(where),
            line=doc.line_for(where),
        )
    data = {
        "id": conn_id,
        "label": raw.label or raw.name or conn_id,
        "type": raw.type,
        "model": strings["model"],
        "base_url": host,
        "key": SecretStr(strings["key"]),
        "api_version": strings["version"],
        "organization": strings["organization"],
        "azure": azure,
        "timeout": raw.options.timeout,
        "max_retries": raw.options.max_retries,
        "max_tokens": raw.options.max_tokens,
        "temperature": raw.options.temperature,
        "thinking": raw.options.thinking,
        "capabilities": raw.options.capabilities,
        "headers": headers,
    }
    return ConnectorSpec.model_validate(data)


class ConnectorTable(SpecTable[ConnectorSpec]):
    """Every connector of the app: the ones that loaded, and the stored error of each one that did not."""

    what = "connector"

    def add(self, conn_id: str, doc: Document, *, environ: Mapping[str, str], prefix: KeyPath = ()) -> str:
        """Load one definition; a failure is stored against `conn_id` instead of raised.

        Returns the connector type when it is one of Yao's non-model types (stored as unusable),
        else "".
        """
        node: Any = doc.value
        for part in prefix:
            node = node.get(part) if isinstance(node, dict) else None
        kind = node.get("type") if isinstance(node, dict) else None
        if isinstance(kind, str) and kind in NON_MODEL_TYPES:
            where = (*prefix, "type")
            self.fail(
                conn_id,
                ConfigError(
                    f"connector type {kind!r} is not a model connector; Cage uses only openai and anthropic",
                    file=doc.file,
                    key_path=format_key_path(where),
                    line=doc.line_for(where),
                ),
            )
            return kind
        self.load(conn_id, lambda: build_connector(conn_id, doc, environ=environ, prefix=prefix))
        return ""
