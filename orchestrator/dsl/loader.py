"""The application directory: `assistants/`, `connectors/`, `mcps/`, `agent/` (or a root `agent.yml`).

`AppLoader` discovers assistants (plus the system assistants shipped in `builtin/`), loads them
on demand into an LRU cache, and holds the app-wide tables (agent defaults, connectors, MCP
servers). It does blocking file I/O: async callers run it through `anyio.to_thread`.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.dsl.agentconfig import AgentConfig
from orchestrator.dsl.agentdir import load_global_layer
from orchestrator.dsl.assistant import (
    AppContext,
    Assistant,
    add_mcp_file,
    assistant_id_for,
    is_system_id,
    load_assistant,
)
from orchestrator.dsl.connectors import CONNECTOR_SUFFIXES, ConnectorSpec, ConnectorTable, file_id
from orchestrator.dsl.diagnostics import flatten
from orchestrator.dsl.document import Document
from orchestrator.dsl.inert import CONNECTOR, ConfigWarning, inert_keys, warning
from orchestrator.dsl.mcp import MCP_SUFFIXES, McpServerSpec, McpTable
from orchestrator.dsl.source import AssistantSource, read_document
from orchestrator.errors import ConfigError, Forbidden, NotFound

BUILTIN_DIR = Path(__file__).parent / "builtin"
"""System assistants shipped with Cage (`__yao.loop_fallback`, ...)."""
_SKIP_DIRS = ("node_modules", "__pycache__")


@dataclass(frozen=True)
class LoadReport:
    """Result of `AppLoader.load_all`: what loaded, and every error found on the way."""

    assistants: tuple[Assistant, ...]
    errors: tuple[ConfigError, ...]
    """Assistant and app-level errors (one bad assistant never hides the others)."""
    warnings: tuple[ConfigWarning, ...] = ()
    """Keys and files that load but have no effect in Cage (app-level, then per assistant)."""
    connector_errors: Mapping[str, ConfigError] = field(default_factory=dict)
    """Connectors that cannot be used (e.g. their `$ENV` key is unset); the app still loads."""
    mcp_errors: Mapping[str, ConfigError] = field(default_factory=dict)
    connector_types: Mapping[str, str] = field(default_factory=dict)
    """The provider (`anthropic`, `openai`) of each connector that loaded."""

    @property
    def ids(self) -> list[str]:
        return [a.id for a in self.assistants]


_Stamp = tuple[tuple[str, int, int], ...]
"""Every file under an assistant's directory: (path, mtime in ns, size)."""


def _stamp(directory: Path) -> _Stamp:
    """What an assistant's load depends on, on disk: a changed, added or removed file changes it."""
    found: list[tuple[str, int, int]] = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            path = Path(root, name)
            try:
                info = path.stat()
            except OSError:
                continue
            found.append((str(path), info.st_mtime_ns, info.st_size))
    return tuple(found)


RECHECK_SECONDS = 1.0
"""How long a broken assistant's error is given again before its files are looked at (stat'ed)."""


@dataclass
class _Failure:
    stamp: _Stamp
    error: ConfigError
    recheck_at: float
    """`time.monotonic()` after which the files are looked at again."""

    def standing(self, now: float) -> bool:
        """Given again without looking at the files (the last look was under a second ago)."""
        return now < self.recheck_at


@dataclass(frozen=True)
class _App:
    ctx: AppContext
    warnings: tuple[ConfigError, ...]
    """App-level problems, reported as errors."""
    notes: tuple[ConfigWarning, ...] = ()
    """App-level keys that have no effect."""


class AppLoader:
    """Loads and caches the assistants of one application directory. Thread-safe."""

    def __init__(
        self,
        app_dir: Path,
        *,
        cache_size: int = 256,
        environ: Mapping[str, str] | None = None,
        builtin_dir: Path | None = BUILTIN_DIR,
    ) -> None:
        if cache_size < 1:
            raise ValueError("cache_size must be at least 1")
        self.app_dir = Path(app_dir).resolve()
        self._cache_size = cache_size
        self._environ: Mapping[str, str] = os.environ if environ is None else environ
        self._builtin_dir = builtin_dir
        self._lock = threading.RLock()
        self._cache: OrderedDict[str, Assistant] = OrderedDict()
        self._failed: dict[str, _Failure] = {}
        """Assistants whose files did not load, with the files' stamp then: asked again, the same
        error without reading them, while the files stay as they were (looked at once a second at
        most). A title assistant with no connector is asked after every turn of every untitled
        session."""
        self._dirs: dict[str, Path] | None = None
        self._dir_errors: list[ConfigError] = []
        self._app: _App | None = None

    # -- app-wide tables -----------------------------------------------------------------------
    @property
    def environ(self) -> Mapping[str, str]:
        """The environment `$ENV.` references resolve against."""
        return self._environ

    @property
    def agent_config(self) -> AgentConfig:
        """`agent/agent.yml` or `agent.yml` (Yao's defaults when both are absent).

        Raises:
            ConfigError: `agent.yml` is invalid.
        """
        return self._state().ctx.agent

    def connector(self, conn_id: str) -> ConnectorSpec:
        """A connector by id.

        Raises:
            ConfigError: the connector exists but cannot be used (the stored load error).
            NotFound: no such connector.
        """
        return self._state().ctx.connectors.get(conn_id)

    def connector_ids(self) -> list[str]:
        return list(self._state().ctx.connectors)

    def mcp_server(self, server_id: str) -> McpServerSpec:
        """An MCP server by id, without any assistant's tool filter.

        Raises:
            ConfigError: the server exists but failed to load.
            NotFound: no such server.
        """
        return self._state().ctx.mcps.get(server_id)

    def mcp_server_ids(self) -> list[str]:
        return list(self._state().ctx.mcps)

    # -- assistants ----------------------------------------------------------------------------
    def ids(self) -> list[str]:
        """Every assistant id found on disk (app and system), sorted."""
        with self._lock:
            return sorted(self._discover())

    def get(self, assistant_id: str) -> Assistant:
        """The assistant `assistant_id`, from the cache or freshly loaded.

        Raises:
            NotFound: no assistant directory has this id.
            ConfigError: its files are invalid (`ConfigErrors` for several problems).
        """
        with self._lock:
            cached = self._cache.get(assistant_id)
            if cached is not None:
                self._cache.move_to_end(assistant_id)
                return cached
            directory = self._discover().get(assistant_id)
            if directory is None:
                self._dirs = None  # it may have been created since the last scan
                directory = self._discover().get(assistant_id)
            if directory is None:
                raise NotFound(f"assistant {assistant_id!r} not found")
            failed = self._failed.get(assistant_id)
            now = time.monotonic()
            if failed is not None and failed.standing(now):
                raise failed.error.with_traceback(None)
            stamp = _stamp(directory)
            if failed is not None and failed.stamp == stamp:
                failed.recheck_at = now + RECHECK_SECONDS
                raise failed.error.with_traceback(None)
            ctx = self._state().ctx
            try:
                source = AssistantSource.of_directory(directory, ctx.rel)
                assistant = load_assistant(source, assistant_id, ctx)
            except ConfigError as exc:
                self._failed[assistant_id] = _Failure(stamp, exc, now + RECHECK_SECONDS)
                raise
            self._failed.pop(assistant_id, None)
            self._cache[assistant_id] = assistant
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            return assistant

    def broken(self, assistant_id: str) -> bool:
        """True while `get` would give the error it gave last time without looking at the files
        again (within a second of the last look). Never blocks: False when another thread holds
        the loader."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            failed = self._failed.get(assistant_id)
            return failed is not None and failed.standing(time.monotonic())
        finally:
            self._lock.release()

    def cached(self, assistant_id: str) -> Assistant | None:
        """The assistant when it is loaded already (what `get` would return without reading a
        file); None when it is not, or when a load in another thread holds the loader. Never
        blocks, so the event loop may call it before handing `get` to a thread."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            cached = self._cache.get(assistant_id)
            if cached is not None:
                self._cache.move_to_end(assistant_id)
            return cached
        finally:
            self._lock.release()

    @property
    def app_loaded(self) -> bool:
        """The app's connectors, MCP servers and `agent.yml` are loaded: reading them reads no file."""
        return self._app is not None

    def load_source(
        self, source: AssistantSource, assistant_id: str, *, environ: Mapping[str, str] | None = None
    ) -> Assistant:
        """Load an assistant that is not one of the app's (an API-created one, held in memory), uncached.
        `environ` replaces the environment its own `$ENV.` references resolve against (API-created
        assistants get only what the operator exposes, never the orchestrator's environment).

        Raises:
            ConfigError: its documents are invalid.
        """
        with self._lock:
            ctx = self._state().ctx
        if environ is not None:
            ctx = dataclasses.replace(ctx, environ=environ)
        return load_assistant(source, assistant_id, ctx)

    def override(self, assistant: Assistant) -> None:
        """Pin a modified copy of an assistant (e.g. `cage run --set ...`) until the next `reload`."""
        with self._lock:
            self._cache[assistant.id] = assistant
            self._cache.move_to_end(assistant.id)

    def cached_ids(self) -> list[str]:
        """Ids in the LRU cache, least recently used first."""
        with self._lock:
            return list(self._cache)

    def reload(self, assistant_id: str | None = None) -> None:
        """Forget one assistant (re-read on next `get`), or everything including `agent.yml`,
        connectors and MCP servers when `assistant_id` is None."""
        with self._lock:
            if assistant_id is None:
                self._cache.clear()
                self._failed.clear()
                self._dirs = None
                self._app = None
            else:
                self._cache.pop(assistant_id, None)
                self._failed.pop(assistant_id, None)
                self._dirs = None

    def load_all(self) -> LoadReport:
        """Load every assistant; collect every error instead of stopping at the first."""
        with self._lock:
            try:
                app = self._state()
            except ConfigError as exc:
                return LoadReport(assistants=(), errors=tuple(flatten(exc)))
            errors: list[ConfigError] = [*app.warnings]
            dirs = self._discover()
            errors.extend(self._dir_errors)
            loaded: list[Assistant] = []
            notes: list[ConfigWarning] = [*app.notes]
            for assistant_id in sorted(dirs):
                try:
                    assistant = self.get(assistant_id)
                except ConfigError as exc:
                    errors.extend(flatten(exc))
                    continue
                loaded.append(assistant)
                notes.extend(assistant.warnings)
            return LoadReport(
                assistants=tuple(loaded),
                errors=tuple(errors),
                warnings=tuple(notes),
                connector_errors=dict(app.ctx.connectors.errors),
                mcp_errors=dict(app.ctx.mcps.errors),
                connector_types={k: v.type.value for k, v in app.ctx.connectors.specs.items()},
            )

    def is_readonly(self, assistant_id: str) -> bool:
        """System ids, assistants shipped in `builtin/`, and packages marked `readonly`."""
        if is_system_id(assistant_id):
            return True
        with self._lock:
            directory = self._discover().get(assistant_id)
            if directory is None:
                return False
            if self._builtin_dir is not None and directory.is_relative_to(self._builtin_dir):
                return True
            try:
                return self.get(assistant_id).readonly
            except ConfigError:
                return False

    def ensure_writable(self, assistant_id: str) -> None:
        """Raises:
        Forbidden: the assistant is a read-only system assistant.
        """
        if self.is_readonly(assistant_id):
            raise Forbidden(f"assistant {assistant_id!r} is read-only")

    # -- internals -----------------------------------------------------------------------------
    def _discover(self) -> dict[str, Path]:
        if self._dirs is None:
            found: dict[str, Path] = {}
            self._dir_errors = []
            roots = [r for r in (self._builtin_dir, self.app_dir / "assistants") if r is not None]
            for root in roots:  # app assistants come last and override shipped ones
                if root.is_dir():
                    self._scan(root, root, found)
            self._dirs = found
        return self._dirs

    def _scan(self, root: Path, directory: Path, found: dict[str, Path]) -> None:
        for child in sorted(directory.iterdir()):
            if not child.is_dir() or child.name.startswith(".") or child.name in _SKIP_DIRS:
                continue
            if (child / "package.yao").is_file():
                try:
                    found[assistant_id_for(child.relative_to(root))] = child
                except ValueError as exc:
                    self._dir_errors.append(ConfigError(str(exc), file=self._rel(child)))
            else:
                self._scan(root, child, found)

    def _rel(self, path: Path) -> Path:
        for base in (self.app_dir, self._builtin_dir.parent if self._builtin_dir else None):
            if base is not None and path.is_relative_to(base):
                return path.relative_to(base)
        return path

    def _state(self) -> _App:
        with self._lock:
            if self._app is None:
                self._app = self._load_app()
            return self._app

    def _load_app(self) -> _App:
        problems: list[ConfigError] = []
        connectors = ConnectorTable()
        mcps = McpTable()
        notes: list[ConfigWarning] = []
        for conn_id, path in _files(self.app_dir / "connectors", CONNECTOR_SUFFIXES):
            try:
                doc = read_document(path, self._rel(path))
            except ConfigError as exc:
                connectors.errors[conn_id] = exc
                continue
            kind = connectors.add(conn_id, doc, environ=self._environ)
            if kind:
                notes.append(
                    warning(
                        doc,
                        ("type",),
                        (
                            f"connector {conn_id!r} ({kind}) has no effect in Cage: Cage uses only model "
                            "connectors (openai, anthropic)"
                        ),
                    )
                )
            elif conn_id in connectors.specs:
                notes.extend(inert_keys(doc, CONNECTOR))
        for server_id, path in _files(self.app_dir / "mcps", MCP_SUFFIXES):
            mapping = self.app_dir / "mcps" / "mapping" / server_id.replace(".", "/")
            notes.extend(
                add_mcp_file(
                    mcps,
                    server_id,
                    path,
                    self._rel(path),
                    self._environ,
                    mapping,
                    self.app_dir / "assistants",
                )
            )
        # Assistants' own mcps/ folders: app-wide servers `agents.<assistant>.<name>`, as in Yao.
        for assistant_id, directory in sorted(self._discover().items()):
            for name, path in _files(directory / "mcps", MCP_SUFFIXES):
                mapping = directory / "mcps" / "mapping" / name.replace(".", "/")
                notes.extend(
                    add_mcp_file(
                        mcps,
                        f"agents.{assistant_id}.{name}",
                        path,
                        self._rel(path),
                        self._environ,
                        mapping,
                        self.app_dir / "assistants",
                    )
                )
        layer = load_global_layer(
            self.app_dir,
            connectors,
            self._environ,
            lambda path: read_document(path, self._rel(path)),
            lambda inline, doc: self._inline_connectors(inline, doc, connectors, problems),
        )
        problems.extend(layer.problems)
        ctx = AppContext(
            app_dir=self.app_dir,
            agent=layer.agent,
            connectors=connectors,
            mcps=mcps,
            environ=self._environ,
            rel=self._rel,
            global_prompts=layer.prompts,
            global_locales=layer.locales,
        )
        return _App(ctx=ctx, warnings=tuple(problems), notes=(*layer.warnings, *notes))

    def _inline_connectors(
        self, inline: object, doc: Document, connectors: ConnectorTable, warnings: list[ConfigError]
    ) -> None:
        if not isinstance(inline, dict):
            raise ConfigError(
                "must map connector ids to definitions",
                file=doc.file,
                key_path="connectors",
                line=doc.line_for(("connectors",)),
            )
        for conn_id in inline:
            if conn_id in connectors:
                warnings.append(
                    ConfigError(
                        f"connector {conn_id!r} is already defined in connectors/; this entry is ignored",
                        file=doc.file,
                        key_path=f"connectors.{conn_id}",
                        line=doc.line_for(("connectors", conn_id)),
                    )
                )
                continue
            connectors.add(str(conn_id), doc, environ=self._environ, prefix=("connectors", conn_id))


def _files(root: Path, suffixes: tuple[str, ...]) -> list[tuple[str, Path]]:
    """`(id, path)` for every file under `root` ending in one of `suffixes`, ids as Yao derives them."""
    if not root.is_dir():
        return []
    out = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and rel.endswith(suffixes) and not rel.startswith("mapping/"):
            out.append((file_id(rel, suffixes), path))
    return out
