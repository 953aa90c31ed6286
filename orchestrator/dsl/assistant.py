"""An assistant directory (`assistants/<a>/<b>/` -> id `a.b`) read into a frozen `Assistant`.

Files: `package.yao` (required), `prompts.yml`, `prompts/<preset>.yml`, `locales/<lang>.yml`,
`skills/<name>/...`, `src/index.py` (hooks: discovered, never run here) and `sandbox.yao`.
Errors from independent files are collected, so one pass reports all of them.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import structlog
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.dsl.agentconfig import USE_PREFIX, AgentConfig, Uses
from orchestrator.dsl.connectors import ConnectorTable
from orchestrator.dsl.diagnostics import flatten, validate
from orchestrator.dsl.document import Document, KeyPath, format_key_path
from orchestrator.dsl.envexpand import EnvExpander
from orchestrator.dsl.jsonc import parse_jsonc
from orchestrator.dsl.mcp import McpOptions, McpServerSpec, McpTable
from orchestrator.dsl.package import PackageSpec, Prompt
from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.dsl.sandboxfile import load_sandbox
from orchestrator.dsl.yamldoc import parse_yaml
from orchestrator.errors import ConfigError, ConfigErrors

log = structlog.get_logger(__name__)
_STRICT = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
SYSTEM_PREFIXES = ("__yao.", "yao.")
T = TypeVar("T")


class AssistantMode(enum.StrEnum):
    """How a turn runs (DESIGN.md, "Modes on top")."""

    RUNNER = "runner"
    """Has a sandbox: an agent CLI (or the native loop) runs against the container."""
    LLM = "llm"
    """Prompts and/or MCP servers, no sandbox: the native loop with MCP tools."""
    HOOK = "hook"
    """Only `src/index.py`: the hooks do all the work."""


class Skill(BaseModel):
    """A folder under `skills/`; `digest` covers every file's relative path and content."""

    model_config = _STRICT
    name: str
    path: Path
    digest: str
    """sha256 hex over the sorted (relative path, content) pairs."""


class Assistant(BaseModel):
    """A loaded assistant, with `agent.yml` defaults merged under its own fields."""

    model_config = _STRICT
    id: str
    path: Path
    """The assistant directory (absolute)."""
    package: PackageSpec
    prompts: tuple[Prompt, ...] = ()
    presets: dict[str, tuple[Prompt, ...]] = Field(default_factory=dict)
    locales: dict[str, dict[str, Any]] = Field(default_factory=dict)
    skills: tuple[Skill, ...] = ()
    hooks_path: Path | None = None
    """`src/index.py` when present."""
    sandbox: SandboxSpec | None = None
    mcp_servers: tuple[McpServerSpec, ...] = ()
    """Resolved servers, each narrowed to the tools/resources the package allows."""
    mcp_options: McpOptions = McpOptions()
    connector: str | None = None
    """Connector id after `$ENV.` and `use::<role>` resolution; None when the app has none."""
    uses: Uses = Uses()
    history_size: int = 20
    fallback: str = ""
    """Assistant that takes over when the LLM tool loop fails."""
    readonly: bool = False
    mode: AssistantMode

    @property
    def name(self) -> str:
        return self.package.name


def is_system_id(assistant_id: str) -> bool:
    """System assistants (`__yao.*`, `yao.*`) are read-only."""
    return assistant_id.startswith(SYSTEM_PREFIXES)


def assistant_id_for(rel_dir: Path) -> str:
    """`assistants/<a>/<b>` relative to the assistants root (`a/b`) -> `a.b`.

    Raises:
        ValueError: a path segment is not a valid id segment (letters, digits, `_`, `-`).
    """
    parts = rel_dir.parts
    bad = [p for p in parts if not _SEGMENT.fullmatch(p)]
    if not parts or bad:
        raise ValueError(f"directory name {bad[0] if bad else ''!r} cannot form an assistant id "
                         "(use letters, digits, '_' and '-')")
    return ".".join(parts)


@dataclass(frozen=True)
class AppContext:
    """What an assistant resolves against: global defaults, connectors, MCP servers, environment."""

    app_dir: Path
    agent: AgentConfig
    connectors: ConnectorTable
    mcps: McpTable
    environ: Mapping[str, str]
    rel: Callable[[Path], Path]
    """Maps a file to the path shown in errors (relative to the app dir)."""


def read_document(path: Path, rel: Path) -> Document:
    """Read and parse a `.yao` (JSONC) or `.yml`/`.yaml` file.

    Raises:
        ConfigError: unreadable file or syntax error.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError("file is not valid UTF-8", file=rel) from None
    except OSError as exc:
        raise ConfigError(f"cannot read file: {exc.strerror}", file=rel) from exc
    if path.suffix in (".yml", ".yaml"):
        return parse_yaml(text, file=rel)
    return parse_jsonc(text, file=rel)


class _Collector:
    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    def run(self, fn: Callable[[], T], default: T) -> T:
        try:
            return fn()
        except ConfigError as exc:
            self.errors.extend(flatten(exc))
            return default

    def raise_any(self) -> None:
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise ConfigErrors(self.errors)


def load_assistant(directory: Path, assistant_id: str, ctx: AppContext) -> Assistant:
    """Read one assistant directory.

    Raises:
        ConfigError: anything wrong in its files (`ConfigErrors` when several things are).
    """
    errors = _Collector()
    pkg_doc = read_document(directory / "package.yao", ctx.rel(directory / "package.yao"))
    sandbox_file = directory / "sandbox.yao"
    package = errors.run(lambda: _package(pkg_doc, ctx, has_sandbox_file=sandbox_file.is_file()), None)
    sandbox: SandboxSpec | None = None
    if sandbox_file.is_file():
        sandbox = errors.run(lambda: _sandbox_file(sandbox_file, ctx), None)
    elif isinstance(pkg_doc.value, dict) and _embedded_v2(pkg_doc.value.get("sandbox")):
        sandbox = errors.run(lambda: _sandbox(pkg_doc, ctx, ("sandbox",)), None)
    prompts = errors.run(lambda: _prompts_file(directory / "prompts.yml", ctx), None)
    no_presets: dict[str, tuple[Prompt, ...]] = {}
    presets = errors.run(lambda: _presets(directory / "prompts", ctx), no_presets)
    no_locales: dict[str, dict[str, Any]] = {}
    locales = errors.run(lambda: _locales(directory / "locales", ctx), no_locales)
    errors.raise_any()
    assert package is not None  # _package either returned or recorded an error raised above

    connector = _resolve_connector(package.connector, pkg_doc, ctx)
    mcp_servers = _resolve_mcp(package, pkg_doc, ctx)
    hooks = directory / "src" / "index.py"
    hooks_path = hooks if hooks.is_file() else None
    all_prompts = prompts if prompts is not None else package.prompts
    mode = _mode(sandbox, all_prompts, mcp_servers, hooks_path)
    if mode is None:
        raise ConfigError("nothing to run: add prompts.yml, mcp servers, sandbox.yao or src/index.py",
                          file=pkg_doc.file)
    return Assistant(
        id=assistant_id,
        path=directory,
        package=package.model_copy(update={"sandbox": sandbox if not sandbox_file.is_file() else None}),
        prompts=all_prompts,
        presets={**package.prompt_presets, **presets},
        locales=locales,
        skills=_skills(directory / "skills"),
        hooks_path=hooks_path,
        sandbox=sandbox,
        mcp_servers=mcp_servers,
        mcp_options=package.mcp.options if package.mcp else McpOptions(),
        connector=connector,
        uses=package.uses.merged_over(ctx.agent.uses) if package.uses else ctx.agent.uses,
        history_size=package.history_size if package.history_size is not None
        else ctx.agent.effective_history_size(),
        fallback=ctx.agent.fallback,
        readonly=is_system_id(assistant_id) or package.readonly,
        mode=mode,
    )


def _mode(sandbox: SandboxSpec | None, prompts: tuple[Prompt, ...], mcp: tuple[McpServerSpec, ...],
          hooks: Path | None) -> AssistantMode | None:
    if sandbox is not None:
        return AssistantMode.RUNNER
    if prompts or mcp:
        return AssistantMode.LLM
    if hooks is not None:
        return AssistantMode.HOOK
    return None


def _embedded_v2(value: Any) -> bool:
    return isinstance(value, dict) and value.get("version") == "2.0"


def _package(doc: Document, ctx: AppContext, *, has_sandbox_file: bool) -> PackageSpec:
    if not isinstance(doc.value, dict):
        raise ConfigError("package.yao must hold an object", file=doc.file, line=doc.line_for(()))
    data = dict(doc.value)
    embedded = data.pop("sandbox", None)
    if embedded is not None and not has_sandbox_file and not _embedded_v2(embedded):
        if not isinstance(embedded, dict):
            raise ConfigError("must be an object with version \"2.0\"", file=doc.file, key_path="sandbox",
                              line=doc.line_for(("sandbox",)))
        # Yao's path B: only version "2.0" counts; older sandbox blocks are ignored with a note.
        log.warning("dsl.sandbox_ignored", file=str(doc.file), version=str(embedded.get("version")))
    EnvExpander(ctx.environ, doc).expand_in(data, ("connector",))
    return validate(PackageSpec, data, doc)


def _sandbox(doc: Document, ctx: AppContext, prefix: KeyPath = ()) -> SandboxSpec:
    spec = load_sandbox(doc, environ=ctx.environ, default_runner=ctx.agent.runner, prefix=prefix)
    resolved = {}
    for role, choice in spec.runner.connectors.items():
        where = (*prefix, "runner", "connectors", role)
        conn = _connector_id(choice.connector, doc, where, ctx)
        resolved[role] = choice.model_copy(update={"connector": conn})
    if not resolved:
        return spec
    return spec.model_copy(update={"runner": spec.runner.model_copy(update={"connectors": resolved})})


def _sandbox_file(path: Path, ctx: AppContext) -> SandboxSpec:
    return _sandbox(read_document(path, ctx.rel(path)), ctx)


def _prompt_list(doc: Document) -> tuple[Prompt, ...]:
    if doc.value is None:
        return ()
    if not isinstance(doc.value, list):
        raise ConfigError("must be a list of {role, content} messages", file=doc.file, line=doc.line_for(()))
    return tuple(validate(Prompt, item, doc, (i,)) for i, item in enumerate(doc.value))


def _prompts_file(path: Path, ctx: AppContext) -> tuple[Prompt, ...] | None:
    if not path.is_file():
        return None
    return _prompt_list(read_document(path, ctx.rel(path)))


def _preset_file(path: Path, ctx: AppContext) -> tuple[Prompt, ...]:
    return _prompt_list(read_document(path, ctx.rel(path)))


def _presets(directory: Path, ctx: AppContext) -> dict[str, tuple[Prompt, ...]]:
    if not directory.is_dir():
        return {}
    errors = _Collector()
    out: dict[str, tuple[Prompt, ...]] = {}
    for file in sorted(directory.iterdir()):
        if file.is_file() and file.suffix in (".yml", ".yaml"):
            found = errors.run(partial(_preset_file, file, ctx), None)
            if found is not None:
                out[file.stem] = found
    errors.raise_any()
    return out


def _locales(directory: Path, ctx: AppContext) -> dict[str, dict[str, Any]]:
    if not directory.is_dir():
        return {}
    out: dict[str, dict[str, Any]] = {}
    for file in sorted(directory.iterdir()):
        if not (file.is_file() and file.suffix in (".yml", ".yaml")):
            continue
        doc = read_document(file, ctx.rel(file))
        if doc.value is None:
            continue
        if not isinstance(doc.value, dict):
            raise ConfigError("a locale file must map message keys to text", file=doc.file,
                              line=doc.line_for(()))
        out[file.stem.lower()] = doc.value
    return out


def _skills(directory: Path) -> tuple[Skill, ...]:
    if not directory.is_dir():
        return ()
    skills = []
    for folder in sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")):
        digest = hashlib.sha256()
        for file in sorted(f for f in folder.rglob("*") if f.is_file()):
            rel = file.relative_to(folder).as_posix().encode()
            digest.update(len(rel).to_bytes(4, "big") + rel)
            content = file.read_bytes()
            digest.update(len(content).to_bytes(8, "big") + content)
        skills.append(Skill(name=folder.name, path=folder, digest=digest.hexdigest()))
    return tuple(skills)


def _connector_id(value: str, doc: Document, where: KeyPath, ctx: AppContext) -> str:
    """A connector id, `use::<role>` resolved; it must name a defined connector."""
    def error(message: str) -> ConfigError:
        return ConfigError(message, file=doc.file, key_path=format_key_path(where), line=doc.line_for(where))

    conn = value
    if value.startswith(USE_PREFIX):
        role = value[len(USE_PREFIX):]
        try:
            found = ctx.agent.role_connector(role)
        except ValueError as exc:
            raise error(str(exc)) from None
        if found is None:
            raise error(f"role {role!r} has no connector: set roles.{role} or roles.default in agent.yml")
        conn = found
    if conn not in ctx.connectors:
        raise error(f"connector {conn!r} is not defined (connectors/{conn}.conn.yao or agent.yml connectors)")
    return conn


def _resolve_connector(value: str | None, doc: Document, ctx: AppContext) -> str | None:
    if value:
        return _connector_id(value, doc, ("connector",), ctx)
    default = ctx.agent.role_connector("default")
    if default is None:
        return None
    if default not in ctx.connectors:
        raise ConfigError(f"default connector {default!r} from agent.yml is not defined", file=doc.file)
    return default


def _resolve_mcp(package: PackageSpec, doc: Document, ctx: AppContext) -> tuple[McpServerSpec, ...]:
    if package.mcp is None:
        return ()
    out = []
    errors = _Collector()
    for i, ref in enumerate(package.mcp.servers):
        where = ("mcp", "servers", i)

        def error(message: str, where: KeyPath = where) -> ConfigError:
            return ConfigError(message, file=doc.file, key_path=format_key_path(where),
                               line=doc.line_for(where))

        if ref.server_id not in ctx.mcps:
            errors.errors.append(
                error(f"MCP server {ref.server_id!r} is not defined (mcps/{ref.server_id}.mcp.yao)"))
            continue
        try:
            server = ctx.mcps.get(ref.server_id)
        except ConfigError as exc:
            errors.errors.append(error(f"MCP server {ref.server_id!r} cannot be used: {exc}"))
            continue
        out.append(server.model_copy(update={"tools": ref.tools, "resources": ref.resources}))
    errors.raise_any()
    return tuple(out)
