"""An assistant directory (`assistants/<a>/<b>/` -> id `a.b`) read into a frozen `Assistant`.

Files: `package.yao` (required), `prompts.yml`, `prompts/<preset>.yml` (nested folders give
dotted presets: `prompts/chat/friendly.yml` -> `chat.friendly`), `locales/<lang>.yml`,
`skills/<name>/...`, hooks (`src/index.ts` as in Yao, or Cage's `src/index.py`; discovered, never
run here), other `src/**.ts` scripts (Yao processes `agents.<id>.<script>.<Function>`), an own
`mcps/` folder (servers `agents.<id>.<name>`), `assets/` (`@assets/<file>` in prompts is replaced
by the file's text, as in Yao) and `sandbox.yao`. Errors from independent files are collected, so
one pass reports all of them; keys that load but have no effect become `warnings`.
"""

from __future__ import annotations

import difflib
import enum
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import structlog
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.attribute_docs import describe_fields
from orchestrator.dsl.agentconfig import USE_PREFIX, AgentConfig, Uses
from orchestrator.dsl.agentdir import load_locale_dir, load_prompts
from orchestrator.dsl.connectors import ConnectorTable, file_id
from orchestrator.dsl.diagnostics import flatten, validate
from orchestrator.dsl.document import Document, KeyPath, format_key_path
from orchestrator.dsl.envexpand import EnvExpander
from orchestrator.dsl.inert import MCP_FILE, PACKAGE, ConfigWarning, inert_keys, warning
from orchestrator.dsl.locales import DEFAULT_LOCALE, Messages, merge, translate
from orchestrator.dsl.mcp import (
    AGENT_PROCESS_PREFIX,
    MCP_SUFFIXES,
    McpOptions,
    McpServerSpec,
    McpTable,
    resolve_process,
)
from orchestrator.dsl.package import PackageSpec, Prompt
from orchestrator.dsl.role_support import role_refusal
from orchestrator.dsl.sandbox import SandboxSpec
from orchestrator.dsl.sandbox_notes import sandbox_notes
from orchestrator.dsl.sandboxfile import load_sandbox
from orchestrator.dsl.skills import Skill, load_skills
from orchestrator.dsl.source import PROMPTS, SANDBOX, AssistantSource, read_document, stored_label
from orchestrator.errors import ConfigError, ConfigErrors

log = structlog.get_logger(__name__)
_STRICT = ConfigDict(extra="forbid", frozen=True, json_schema_extra=describe_fields)
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
    """Only hooks (`src/index.ts` or `src/index.py`): the hooks do all the work."""


class Assistant(BaseModel):
    """A loaded assistant, with `agent.yml` defaults merged under its own fields."""

    model_config = _STRICT
    id: str
    path: Path | None
    """The assistant directory (absolute); None for one stored in the database (documents only)."""
    package: PackageSpec
    prompts: tuple[Prompt, ...] = ()
    presets: dict[str, tuple[Prompt, ...]] = Field(default_factory=dict)
    locales: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """The assistant's own `locales/` files, as written."""
    messages: dict[str, Messages] = Field(default_factory=dict)
    """Message tables per locale (dot keys, short codes, global messages under the assistant's)."""
    global_prompts: tuple[Prompt, ...] = ()
    """`agent/prompts.yml`, put before the assistant's prompts; empty with `disable_global_prompts`."""
    skills: tuple[Skill, ...] = ()
    hooks_path: Path | None = None
    """`src/index.ts` (Yao's TypeScript hooks) or `src/index.py` (Cage's Python hooks)."""
    scripts: dict[str, Path] = Field(default_factory=dict)
    """Other `src/**.ts` files by script id (`src/lib/util.ts` -> `lib.util`): Yao processes
    `agents.<assistant>.<script>.<Function>`."""
    warnings: tuple[ConfigWarning, ...] = ()
    """Keys of its files that load but have no effect in Cage."""
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

    def file(self, name: str) -> Path:
        """Where the assistant's file `name` (`package.yao`, `sandbox.yao`) is, as errors name it."""
        return (self.path if self.path is not None else stored_label(self.id)) / name

    @property
    def own_sandbox_file(self) -> bool:
        """Its sandbox comes from `sandbox.yao`, not from package.yao's embedded `sandbox`."""
        return self.sandbox is not None and self.package.sandbox is None

    @property
    def hooks_language(self) -> str:
        """`typescript`, `python`, or "" without hooks."""
        if self.hooks_path is None:
            return ""
        return "typescript" if self.hooks_path.suffix == ".ts" else "python"


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
        raise ValueError(
            f"directory name {bad[0] if bad else ''!r} cannot form an assistant id "
            "(use letters, digits, '_' and '-')"
        )
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
    global_prompts: tuple[Prompt, ...] = ()
    global_locales: Mapping[str, Messages] = field(default_factory=dict)


def add_mcp_file(
    table: McpTable,
    server_id: str,
    path: Path,
    rel: Path,
    environ: Mapping[str, str],
    mapping: Path,
    assistants_root: Path,
) -> list[ConfigWarning]:
    """Load one `.mcp.yao` into `table`; the warnings it earns (inert keys, processes Cage cannot run).

    A `process` server's tools are resolved to the assistant scripts they name."""
    try:
        doc = read_document(path, rel)
    except ConfigError as exc:
        table.errors[server_id] = exc
        return []
    table.add(server_id, doc, environ=environ, mapping=mapping)
    spec = table.specs.get(server_id)
    if spec is None:
        return []
    notes = inert_keys(doc, MCP_FILE)
    tools = []
    for tool in spec.process_tools:
        found = resolve_process(tool.process, assistants_root)
        if found is None:
            notes.append(
                warning(
                    doc,
                    ("tools", tool.name),
                    (
                        f"process {tool.process!r} has no equivalent in Cage (it runs only assistant "
                        f"scripts, {AGENT_PROCESS_PREFIX}<assistant>.<script>.<Function>); "
                        "calling this tool fails"
                    ),
                )
            )
            tools.append(tool)
            continue
        owner, script, function = found
        tools.append(tool.model_copy(update={"script": script, "function": function, "assistant_id": owner}))
    if tools:
        table.specs[server_id] = spec.model_copy(update={"process_tools": tuple(tools)})
    return notes


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


def load_assistant(source: AssistantSource, assistant_id: str, ctx: AppContext) -> Assistant:
    """Read one assistant from its documents (a directory, or a stored assistant's in memory).

    Raises:
        ConfigError: anything wrong in its files (`ConfigErrors` when several things are).
    """
    errors = _Collector()
    notes: list[ConfigWarning] = []
    pkg_doc = source.package()
    own_sandbox = source.has(SANDBOX)
    package = errors.run(lambda: _package(pkg_doc, ctx, notes, has_sandbox_file=own_sandbox), None)
    sandbox: SandboxSpec | None = None
    if own_sandbox:
        sandbox = errors.run(lambda: _sandbox_file(source, ctx, notes), None)
    elif isinstance(pkg_doc.value, dict) and _embedded_v2(pkg_doc.value.get("sandbox")):
        sandbox = errors.run(lambda: _sandbox(pkg_doc, ctx, notes, ("sandbox",)), None)
    assets = source.folder("assets")
    prompts = errors.run(lambda: _prompts_file(source, assets), None)
    no_presets: dict[str, tuple[Prompt, ...]] = {}
    presets = errors.run(lambda: _presets(source.folder("prompts"), ctx, assets), no_presets)
    no_locales: dict[str, dict[str, Any]] = {}
    locales = errors.run(lambda: _locales(source.folder("locales"), ctx), no_locales)
    hooks_path = errors.run(lambda: _hooks(source.directory, ctx), None)
    no_skills: tuple[Skill, ...] = ()
    skills_dir = source.folder("skills")
    skills = no_skills
    if skills_dir is not None:
        skills = errors.run(lambda: load_skills(skills_dir, ctx.rel), no_skills)
    errors.raise_any()
    assert package is not None  # _package either returned or recorded an error raised above

    messages = merge(
        ctx.global_locales,
        _own_messages(source.folder("locales"), ctx),
        {"name": package.name, "description": package.description, "capabilities": package.capabilities},
    )
    package = _localized(package, messages)
    connector = _resolve_connector(package.connector, pkg_doc, ctx)
    local_mcps, local_notes = _local_mcps(source.folder("mcps"), assistant_id, ctx)
    notes.extend(local_notes)
    mcp_servers = _resolve_mcp(package, pkg_doc, ctx, local_mcps, notes, in_sandbox=sandbox is not None)
    all_prompts = prompts if prompts is not None else package.prompts
    mode = _mode(sandbox, all_prompts, mcp_servers, hooks_path)
    notes.extend(_vision_notes(pkg_doc, package, sandbox))
    if mode is None:
        raise ConfigError(
            "nothing to run: add prompts.yml, mcp servers, sandbox.yao or src/index.ts (or src/index.py)",
            file=pkg_doc.file,
        )
    return Assistant(
        id=assistant_id,
        path=source.directory,
        package=package.model_copy(update={"sandbox": sandbox if not own_sandbox else None}),
        prompts=all_prompts,
        presets={**package.prompt_presets, **presets},
        locales=locales,
        messages=messages,
        global_prompts=() if package.disable_global_prompts else ctx.global_prompts,
        skills=skills,
        hooks_path=hooks_path,
        scripts=_scripts(source.folder("src")),
        sandbox=sandbox,
        mcp_servers=mcp_servers,
        mcp_options=package.mcp.options if package.mcp else McpOptions(),
        connector=connector,
        uses=package.uses.merged_over(ctx.agent.uses) if package.uses else ctx.agent.uses,
        history_size=package.history_size
        if package.history_size is not None
        else ctx.agent.effective_history_size(),
        fallback=ctx.agent.fallback,
        readonly=is_system_id(assistant_id) or package.readonly,
        mode=mode,
        warnings=tuple(notes),
    )


HOOK_FILES = ("index.ts", "index.py")


def _hooks(directory: Path | None, ctx: AppContext) -> Path | None:
    if directory is None:
        return None
    found = [directory / "src" / name for name in HOOK_FILES if (directory / "src" / name).is_file()]
    if len(found) > 1:
        raise ConfigError(
            "src/index.ts and src/index.py both define hooks; keep one", file=ctx.rel(directory / "src")
        )
    return found[0] if found else None


def _scripts(src: Path | None) -> dict[str, Path]:
    """`src/**.ts` except `index.ts` and `*_test.ts`, by Yao's script id (lower case, dotted)."""
    if src is None or not src.is_dir():
        return {}
    out = {}
    for file in sorted(src.rglob("*.ts")):
        rel = file.relative_to(src).as_posix()
        if rel == "index.ts" or rel.endswith(("_test.ts", ".d.ts")) or not file.is_file():
            continue
        out[rel[: -len(".ts")].replace("/", ".").lower()] = file
    return out


def _own_messages(locales: Path | None, ctx: AppContext) -> dict[str, Messages]:
    if locales is None:
        return {}
    try:
        return load_locale_dir(locales, lambda p: read_document(p, ctx.rel(p)))
    except ConfigError:
        return {}  # _locales reported it


_LOCALIZED = ("name", "description", "placeholder", "tags")


def _localized(package: PackageSpec, messages: Mapping[str, Messages]) -> PackageSpec:
    """The package's display fields with `{{ key }}` templates resolved in the default locale."""
    data = package.model_dump(mode="json", include=set(_LOCALIZED), exclude_none=True)
    done = translate(data, messages, DEFAULT_LOCALE)
    if done == data:
        return package
    return PackageSpec.model_validate({**package.model_dump(exclude_unset=True, by_alias=True), **done})


def _local_mcps(
    root: Path | None, assistant_id: str, ctx: AppContext
) -> tuple[McpTable, list[ConfigWarning]]:
    """The assistant's own `mcps/` folder: servers `agents.<assistant>.<name>` (for assistants outside
    the app's `assistants/`; the loader registers the app's own app-wide)."""
    table = McpTable()
    notes: list[ConfigWarning] = []
    if root is None or not root.is_dir():
        return table, notes
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if not path.is_file() or not rel.endswith(MCP_SUFFIXES) or rel.startswith("mapping/"):
            continue
        name = file_id(rel, MCP_SUFFIXES)
        server_id = f"agents.{assistant_id}.{name}"
        if server_id in ctx.mcps:  # the loader read the app's assistants' folders already
            continue
        mapping = root / "mapping" / name.replace(".", "/")
        notes.extend(
            add_mcp_file(
                table, server_id, path, ctx.rel(path), ctx.environ, mapping, ctx.app_dir / "assistants"
            )
        )
    return table, notes


def _mode(
    sandbox: SandboxSpec | None,
    prompts: tuple[Prompt, ...],
    mcp: tuple[McpServerSpec, ...],
    hooks: Path | None,
) -> AssistantMode | None:
    # An assistant that declares MCP servers none of which resolved still counts as LLM mode when
    # it has prompts; without prompts, servers or hooks there is nothing to run.
    if sandbox is not None:
        return AssistantMode.RUNNER
    if prompts or mcp:
        return AssistantMode.LLM
    if hooks is not None:
        return AssistantMode.HOOK
    return None


def _embedded_v2(value: Any) -> bool:
    return isinstance(value, dict) and value.get("version") == "2.0"


def _package(
    doc: Document, ctx: AppContext, notes: list[ConfigWarning], *, has_sandbox_file: bool
) -> PackageSpec:
    if not isinstance(doc.value, dict):
        raise ConfigError("package.yao must hold an object", file=doc.file, line=doc.line_for(()))
    data = dict(doc.value)
    embedded = data.pop("sandbox", None)
    if embedded is not None and not has_sandbox_file and not _embedded_v2(embedded):
        if not isinstance(embedded, dict):
            raise ConfigError(
                'must be an object with version "2.0"',
                file=doc.file,
                key_path="sandbox",
                line=doc.line_for(("sandbox",)),
            )
        # Yao's path B: only version "2.0" counts; older (V1) sandbox blocks are ignored, as in Yao.
        notes.append(
            warning(
                doc,
                ("sandbox",),
                (
                    'has no effect: a sandbox without version "2.0" is Yao\'s deprecated V1 form, ignored by '
                    "Yao and Cage; use sandbox.yao"
                ),
            )
        )
    EnvExpander(ctx.environ, doc).expand_in(data, ("connector",))
    package = validate(PackageSpec, data, doc)
    notes.extend(inert_keys(doc, PACKAGE))
    extra = package.mcp.options.model_extra if package.mcp else None
    known = list(McpOptions.model_fields)
    for key in sorted(extra or {}):
        where = ("mcp", "options", key)
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
        if close:  # Yao's map takes any key, but a near miss of a key Cage reads is a typo
            raise ConfigError(
                f"unknown key (did you mean {close[0]}?)",
                file=doc.file,
                key_path=format_key_path(where),
                line=doc.line_for(where),
            )
        notes.append(
            warning(
                doc,
                where,
                "has no effect in Cage: the LLM tool loop reads max_turn, tool_loop and max_retries only",
            )
        )
    return package


VISION_RUNNERS = ("yaocode",)
"""Runners whose turn describes images with `uses.vision` (the CLIs send images to their own model)."""


def _vision_notes(doc: Document, package: PackageSpec, sandbox: SandboxSpec | None) -> list[ConfigWarning]:
    """`uses.vision` in package.yao where it does nothing: an `mcp:` value, or a runner that sends
    images to its own model (`orchestrator.pipeline.modes.vision_fallback`)."""
    value = package.uses.vision if package.uses else None
    where = ("uses", "vision")
    if not value:
        return []
    if value.startswith("mcp:") or value == "builtin":
        return [warning(doc, where, "has no effect in Cage: only an assistant id describes images")]
    if sandbox is not None and sandbox.runner.name not in VISION_RUNNERS:
        return [
            warning(
                doc,
                where,
                (
                    f"has no effect with the {sandbox.runner.name} runner: it sends images to its own model; "
                    "LLM mode and the yaocode runner use uses.vision"
                ),
            )
        ]
    return []


YAO_TAI_IMAGES = "yaoapp/tai-sandbox-"
"""Yao's runner images (Tai inside); Cage builds its own runner image for the runner instead."""


def _sandbox(doc: Document, ctx: AppContext, notes: list[ConfigWarning], prefix: KeyPath = ()) -> SandboxSpec:
    spec = load_sandbox(doc, environ=ctx.environ, default_runner=ctx.agent.runner, prefix=prefix)
    notes.extend(sandbox_notes(doc, spec, prefix))
    if spec.computer.image and spec.computer.image.startswith(YAO_TAI_IMAGES):
        notes.append(
            warning(
                doc,
                (*prefix, "computer", "image"),
                (
                    f"{spec.computer.image!r} is one of Yao's Tai runner images; Cage runs its own "
                    f"{spec.runner.name} runner image instead"
                ),
            )
        )
        spec = spec.model_copy(update={"computer": spec.computer.model_copy(update={"image": None})})
    resolved = {}
    for role, choice in spec.runner.connectors.items():
        where = (*prefix, "runner", "connectors", role)
        conn = _connector_id(choice.connector, doc, where, ctx)
        refusal = role_refusal(spec.runner.name, role)
        if refusal is not None:
            notes.append(warning(doc, where, refusal))
            continue
        resolved[role] = choice.model_copy(update={"connector": conn})
    if not spec.runner.connectors:
        return spec
    return spec.model_copy(update={"runner": spec.runner.model_copy(update={"connectors": resolved})})


def _sandbox_file(source: AssistantSource, ctx: AppContext, notes: list[ConfigWarning]) -> SandboxSpec:
    doc = source.document(SANDBOX)
    assert doc is not None  # the caller checked `source.has(SANDBOX)`
    return _sandbox(doc, ctx, notes)


_ASSET = re.compile(r"@assets/([^\s]+\.(?:md|yml|yaml|json|txt))")


def _read_prompts(doc: Document, assets: Path | None) -> tuple[Prompt, ...]:
    """A prompts document with Yao's `@assets/<file>` references replaced by the file's text."""
    if assets is not None and assets.is_dir() and "@assets/" in json.dumps(doc.value, default=str):
        root = assets.resolve()

        def inline(match: re.Match[str]) -> str:
            target = (assets / match.group(1)).resolve()
            if not target.is_relative_to(root) or not target.is_file():
                return match.group(0)
            return target.read_text(encoding="utf-8", errors="replace")

        def walk(value: Any) -> Any:
            if isinstance(value, str):
                return _ASSET.sub(inline, value)
            if isinstance(value, list):
                return [walk(v) for v in value]
            if isinstance(value, dict):
                return {k: walk(v) for k, v in value.items()}
            return value

        doc = Document(file=doc.file, value=walk(doc.value), lines=doc.lines)
    return load_prompts(doc)


def _prompts_file(source: AssistantSource, assets: Path | None) -> tuple[Prompt, ...] | None:
    doc = source.document(PROMPTS)
    return None if doc is None else _read_prompts(doc, assets)


def _preset_file(file: Path, ctx: AppContext, assets: Path | None) -> tuple[Prompt, ...]:
    return _read_prompts(read_document(file, ctx.rel(file)), assets)


def _presets(directory: Path | None, ctx: AppContext, assets: Path | None) -> dict[str, tuple[Prompt, ...]]:
    """`prompts/**.yml` by preset name: the relative path without extension, `/` -> `.`."""
    if directory is None or not directory.is_dir():
        return {}
    errors = _Collector()
    out: dict[str, tuple[Prompt, ...]] = {}
    for file in sorted(directory.rglob("*")):
        if file.is_file() and file.suffix in (".yml", ".yaml"):
            found = errors.run(partial(_preset_file, file, ctx, assets), None)
            if found is not None:
                out[file.relative_to(directory).with_suffix("").as_posix().replace("/", ".")] = found
    errors.raise_any()
    return out


def _locales(directory: Path | None, ctx: AppContext) -> dict[str, dict[str, Any]]:
    if directory is None or not directory.is_dir():
        return {}
    out: dict[str, dict[str, Any]] = {}
    for file in sorted(directory.iterdir()):
        if not (file.is_file() and file.suffix in (".yml", ".yaml")):
            continue
        doc = read_document(file, ctx.rel(file))
        if doc.value is None:
            continue
        if not isinstance(doc.value, dict):
            raise ConfigError(
                "a locale file must map message keys to text", file=doc.file, line=doc.line_for(())
            )
        out[file.stem.lower()] = doc.value
    return out


def _connector_id(value: str, doc: Document, where: KeyPath, ctx: AppContext) -> str:
    """A connector id, `use::<role>` resolved; it must name a defined connector."""

    def error(message: str) -> ConfigError:
        return ConfigError(message, file=doc.file, key_path=format_key_path(where), line=doc.line_for(where))

    conn = value
    if value.startswith(USE_PREFIX):
        role = value[len(USE_PREFIX) :]
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


def _resolve_mcp(
    package: PackageSpec,
    doc: Document,
    ctx: AppContext,
    local: McpTable,
    notes: list[ConfigWarning],
    *,
    in_sandbox: bool = False,
) -> tuple[McpServerSpec, ...]:
    """The package's servers: its own `mcps/` first, then the app's. An undefined server is a
    warning (Yao loads such an assistant and fails the call); one that fails to load is an error.

    `in_sandbox`: the agent CLI in the box connects to the servers itself. A streamable-HTTP
    server's credentials are added by Cage's gateway outside the box, but an `sse` server names
    its message endpoint at run time, so its headers would have to enter the box: refused."""
    if package.mcp is None:
        return ()
    out = []
    errors = _Collector()
    for i, ref in enumerate(package.mcp.servers):
        where = ("mcp", "servers", i)

        def error(message: str, where: KeyPath = where) -> ConfigError:
            return ConfigError(
                message, file=doc.file, key_path=format_key_path(where), line=doc.line_for(where)
            )

        table = local if ref.server_id in local else ctx.mcps
        if ref.server_id not in table:
            notes.append(
                warning(
                    doc,
                    where,
                    (
                        f"MCP server {ref.server_id!r} is not defined (mcps/ of the app or of the "
                        "assistant); the assistant runs without it"
                    ),
                )
            )
            continue
        try:
            server = table.get(ref.server_id)
        except ConfigError as exc:
            errors.errors.append(error(f"MCP server {ref.server_id!r} cannot be used: {exc}"))
            continue
        if in_sandbox and server.transport == "sse" and server.headers:
            errors.errors.append(
                error(
                    f"MCP server {ref.server_id!r} uses the sse transport with credentials (headers): the "
                    "agent in the sandbox would hold them, while only streamable-HTTP servers' credentials "
                    "stay outside (added by Cage's gateway); use transport 'http' or drop the headers"
                )
            )
            continue
        out.append(server.model_copy(update={"tools": ref.tools, "resources": ref.resources}))
    errors.raise_any()
    return tuple(out)
