"""MCP servers: `mcps/<id>.mcp.yao` (Yao/gou's MCP client DSL) and the references to them.

A file names a transport: `stdio` (`command`, `arguments`, `env`), `http`/`sse` (`url`,
`authorization_token`, `headers`), or Yao's `process`, whose `tools` map tool names to processes
(input schemas in `mapping/<id path>/schemes/<tool>.in.yao` beside the file). Cage can call the
processes an assistant's own scripts define (`agents.<assistant>.<script>.<Function>`); any other
process is named in a load warning and fails when called. Ids are derived as Yao derives them:
`mcps/a/b.mcp.yao` -> `a.b`, and an assistant's own `mcps/` folder gives
`agents.<assistant>.<name>`. Strings support `$ENV.`; the token, `env` and `headers` values count
as secrets. A package refers to servers by `server_id`, optionally narrowing the tools and
resources it may use. Like connectors, a server that fails to load is an error only for the
assistants that use it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orchestrator.attribute_docs import describe_fields
from orchestrator.dsl.diagnostics import validate
from orchestrator.dsl.document import Document
from orchestrator.dsl.envexpand import EnvExpander
from orchestrator.dsl.jsonc import parse_jsonc
from orchestrator.dsl.spec_table import SpecTable
from orchestrator.dsl.units import Duration
from orchestrator.errors import ConfigError

_STRICT = ConfigDict(extra="forbid", frozen=True, json_schema_extra=describe_fields)
MCP_SUFFIX = ".mcp.yao"
MCP_SUFFIXES = (".mcp.yao", ".mcp.jsonc", ".mcp.json")
Transport = Literal["stdio", "http", "sse", "process"]
AGENT_PROCESS_PREFIX = "agents."


class McpFile(BaseModel):
    """A whole `<id>.mcp.yao` file."""

    model_config = _STRICT
    id: str = ""
    """Ignored in favour of the file name; accepted because Yao files carry it."""
    name: str = ""
    version: str = ""
    transport: Transport
    label: str = ""
    description: str = ""
    tags: tuple[str, ...] = ()
    readonly: bool = False
    builtin: bool = False
    sort: int = 0
    enable_sampling: bool = False
    enable_roots: bool = False
    roots_list_changed: bool = False
    enable_elicitation: bool = False
    url: str = ""
    """Server URL for `http` and `sse`."""
    authorization_token: str = ""
    """Bearer token for `http`/`sse`; usually `$ENV.NAME`."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra HTTP headers (Cage extension)."""
    command: str = ""
    """Program for `stdio`."""
    arguments: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    timeout: Duration | None = None
    type: str = ""
    """Yao's client type (`standard`, `agent`, `system`); informational."""
    endpoint: str = ""
    """Yao: API path appended to `url`."""
    dependencies: dict[str, str] = Field(default_factory=dict)
    """Yao registry constraints on other MCP clients; not resolved by Cage."""
    capabilities: dict[str, Any] | None = None
    """Server capabilities a `process` server announces; Cage derives them from the mappings."""
    tools: dict[str, str] = Field(default_factory=dict)
    """`process` transport: tool name -> process name."""
    resources: dict[str, str] = Field(default_factory=dict)
    """`process` transport: resource name -> process name."""
    prompts: dict[str, str] = Field(default_factory=dict)
    """`process` transport: prompt name -> process name."""

    @model_validator(mode="after")
    def _transport_fields(self) -> McpFile:
        if self.transport == "stdio" and not self.command:
            raise ValueError("transport stdio needs a command")
        if self.transport in ("http", "sse") and not self.url:
            raise ValueError(f"transport {self.transport} needs a url")
        if self.transport == "process" and not self.tools:
            raise ValueError("transport process needs tools (tool name -> process)")
        return self


class ProcessTool(BaseModel):
    """One tool of a `process` server: the process it calls and the schema the model sees."""

    model_config = _STRICT
    name: str
    process: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    script: Path | None = None
    """`src/<script>.ts` of the assistant the process names (`agents.<id>.<script>.<Function>`);
    None when Cage has no equivalent of the process."""
    function: str = ""
    assistant_id: str = ""


def resolve_process(process: str, assistants_root: Path) -> tuple[str, Path, str] | None:
    """`agents.<id>.<script>.<Function>` -> (assistant id, script file, function), when it exists.

    The id and the script may both contain dots, so every split is tried, longest id first.
    """
    if not process.lower().startswith(AGENT_PROCESS_PREFIX):
        return None
    parts = process[len(AGENT_PROCESS_PREFIX) :].split(".")
    if len(parts) < 3:
        return None
    *path, function = parts
    for cut in range(len(path) - 1, 0, -1):
        directory = assistants_root.joinpath(*path[:cut])
        script = directory.joinpath("src", *path[cut:]).with_suffix(".ts")
        if (directory / "package.yao").is_file() and script.is_file():
            return ".".join(path[:cut]), script, function
    return None


class McpServerSpec(BaseModel):
    """A resolved MCP server, as the LLM layer uses it. `env` and `headers` never show in `repr`."""

    model_config = _STRICT
    id: str
    label: str = ""
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    url: str = ""
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    """Includes `Authorization: Bearer <token>` when the file sets `authorization_token`."""
    timeout: timedelta | None = None
    process_tools: tuple[ProcessTool, ...] = ()
    """`process` transport: the tools and the processes they call."""
    tools: tuple[str, ...] = ()
    """Tools the assistant may call; empty means all."""
    resources: tuple[str, ...] = ()
    """Resources the assistant may read; empty means all."""


class McpServerRef(BaseModel):
    """One entry of `mcp.servers` in `package.yao`.

    Yao accepts `"id"`, `{"server_id": "id", "tools": [...], "resources": [...]}`,
    `{"id": ["tool", ...]}` and `{"id": {"tools": [...], "resources": [...]}}`.
    """

    model_config = _STRICT
    server_id: str = Field(min_length=1)
    tools: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"server_id": data}
        if isinstance(data, dict) and "server_id" not in data and len(data) == 1:
            ((server_id, detail),) = data.items()
            if isinstance(detail, list):
                return {"server_id": server_id, "tools": detail}
            if isinstance(detail, dict):
                return {"server_id": server_id, **detail}
        return data


class McpOptions(BaseModel):
    """`mcp.options` in `package.yao`: the LLM-mode tool loop.

    Yao types this map as free-form, so keys other than these load too (`timeout`, ...); the
    loader names each of them in a warning, as Cage does not read them.
    """

    model_config = ConfigDict(extra="allow", frozen=True, json_schema_extra=describe_fields)
    max_turn: int = Field(default=5, ge=1, le=100)
    """Rounds of tool calls before handing over to the fallback assistant."""
    tool_loop: bool = True
    """Feed tool results back to the model; `false` stops after one round."""
    max_retries: int = Field(default=3, ge=0, le=10)
    """Attempts for a failing tool call (Cage extension)."""


class McpConfig(BaseModel):
    """`mcp` in `package.yao`."""

    model_config = _STRICT
    servers: tuple[McpServerRef, ...] = ()
    options: McpOptions = McpOptions()


def _process_tools(raw: McpFile, doc: Document, mapping: Path | None) -> tuple[ProcessTool, ...]:
    out = []
    for name, process in sorted(raw.tools.items()):
        schema: dict[str, Any] = {"type": "object"}
        file = mapping / "schemes" / f"{name}.in.yao" if mapping is not None else None
        if file is not None and file.is_file():
            try:
                loaded = parse_jsonc(file.read_text(encoding="utf-8"), file=doc.file.parent / file.name).value
            except (OSError, UnicodeDecodeError):
                loaded = None
            if not isinstance(loaded, dict):
                raise ConfigError(
                    f"input schema of tool {name!r} must be a JSON object",
                    file=doc.file,
                    key_path=f"tools.{name}",
                    line=doc.line_for(("tools", name)),
                )
            schema = loaded
        description = schema.get("description")
        out.append(
            ProcessTool(
                name=name,
                process=process,
                input_schema=schema,
                description=description if isinstance(description, str) else "",
            )
        )
    return tuple(out)


def build_mcp_server(
    server_id: str, doc: Document, *, environ: Mapping[str, str], mapping: Path | None = None
) -> McpServerSpec:
    """Validate an `.mcp.yao` document and expand its `$ENV.` values.

    `mapping` is the folder holding a `process` server's `schemes/<tool>.in.yao` input schemas.

    Raises:
        ConfigError: invalid keys or a `$ENV` variable that is not set.
    """
    raw_data = copy.deepcopy(doc.value)
    raw = validate(McpFile, raw_data, doc)
    expander = EnvExpander(environ, doc)
    env = {k: expander.expand(v, ("env", k), secret=True) for k, v in raw.env.items()}
    headers = {k: expander.expand(v, ("headers", k), secret=True) for k, v in raw.headers.items()}
    token = expander.expand(raw.authorization_token, ("authorization_token",), secret=True)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    url = expander.expand(raw.url, ("url",))
    if url and not url.startswith(("http://", "https://")):
        raise ConfigError(
            "url must start with http:// or https://",
            file=doc.file,
            key_path="url",
            line=doc.line_for(("url",)),
        )
    return McpServerSpec(
        id=server_id,
        label=raw.label or raw.name or server_id,
        transport=raw.transport,
        command=expander.expand(raw.command, ("command",)),
        args=tuple(expander.expand(a, ("arguments", i)) for i, a in enumerate(raw.arguments)),
        env=env,
        url=url,
        headers=headers,
        timeout=raw.timeout,
        process_tools=_process_tools(raw, doc, mapping) if raw.transport == "process" else (),
    )


class McpTable(SpecTable[McpServerSpec]):
    """Every MCP server of the app, and the stored error of each one that failed to load."""

    what = "MCP server"

    def add(
        self, server_id: str, doc: Document, *, environ: Mapping[str, str], mapping: Path | None = None
    ) -> None:
        """Load one file; a failure is stored against `server_id` instead of raised."""
        self.load(server_id, lambda: build_mcp_server(server_id, doc, environ=environ, mapping=mapping))
