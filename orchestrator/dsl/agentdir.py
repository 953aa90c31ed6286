"""The application's global layer: Yao's `agent/` folder, or Cage's root `agent.yml` shorthand.

`agent/agent.yml` (Yao's place; a root `agent.yml` is used only when it is absent), beside
`agent/prompts.yml` (global prompts, put before every assistant's own unless it sets
`disable_global_prompts`), `agent/locales/` (app-wide messages under every assistant's) and
`agent/kb.yml` / `agent/search.yml` (read and checked for syntax; Cage has no knowledge bases or
search, so each one present is a warning). Yao's defaults are applied as Yao applies them:
`uses.default = "mohe"` when `uses` is absent, `uses.title = "__yao.title"`, `uses.prompt =
"__yao.prompt"`, `uses.robot_prompt = "__yao.robot_prompt"`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.dsl.agentconfig import ROLES, AgentConfig
from orchestrator.dsl.connectors import ConnectorTable
from orchestrator.dsl.diagnostics import validate
from orchestrator.dsl.document import Document
from orchestrator.dsl.envexpand import EnvExpander
from orchestrator.dsl.inert import AGENT, ConfigWarning, inert_keys, warning
from orchestrator.dsl.locales import Messages, flatten, with_short_codes
from orchestrator.dsl.package import Prompt
from orchestrator.errors import ConfigError

AGENT_DIR = "agent"
AGENT_FILE = "agent.yml"
YAO_DEFAULT_USES = {"title": "__yao.title", "prompt": "__yao.prompt", "robot_prompt": "__yao.robot_prompt"}
YAO_DEFAULT_ASSISTANT = "mohe"
ReadDocument = Callable[[Path], Document]


@dataclass
class GlobalLayer:
    """What the app-wide files hold, plus what was found wrong (`problems`) or inert (`warnings`)."""

    agent: AgentConfig = field(default_factory=AgentConfig)
    prompts: tuple[Prompt, ...] = ()
    locales: dict[str, Messages] = field(default_factory=dict)
    warnings: list[ConfigWarning] = field(default_factory=list)
    problems: list[ConfigError] = field(default_factory=list)


def agent_file(app_dir: Path) -> Path | None:
    """`agent/agent.yml`, else the root `agent.yml`, else None."""
    for path in (app_dir / AGENT_DIR / AGENT_FILE, app_dir / AGENT_FILE):
        if path.is_file():
            return path
    return None


def load_prompts(doc: Document) -> tuple[Prompt, ...]:
    """A prompts file: a list of `{role, content, name?}` (empty file: none).

    Raises:
        ConfigError: not a list, or a bad message.
    """
    if doc.value is None:
        return ()
    if not isinstance(doc.value, list):
        raise ConfigError("must be a list of {role, content} messages", file=doc.file, line=doc.line_for(()))
    return tuple(validate(Prompt, item, doc, (i,)) for i, item in enumerate(doc.value))


def load_locale_dir(directory: Path, read: ReadDocument) -> dict[str, Messages]:
    """`<lang>.yml` files of a `locales/` folder, flattened, with short codes.

    Raises:
        ConfigError: a file does not parse or does not hold a mapping.
    """
    if not directory.is_dir():
        return {}
    out: dict[str, Messages] = {}
    for file in sorted(directory.iterdir()):
        if not (file.is_file() and file.suffix in (".yml", ".yaml")):
            continue
        doc = read(file)
        if doc.value is None:
            continue
        if not isinstance(doc.value, dict):
            raise ConfigError(
                "a locale file must map message keys to text", file=doc.file, line=doc.line_for(())
            )
        out[file.stem.lower()] = flatten(doc.value)
    return with_short_codes(out)


def load_global_layer(
    app_dir: Path,
    connectors: ConnectorTable,
    environ: Mapping[str, str],
    read: ReadDocument,
    add_inline: Callable[[object, Document], None],
) -> GlobalLayer:
    """Read the global layer. A broken `agent.yml` raises; other files record their problem.

    Raises:
        ConfigError: `agent.yml` does not parse or does not fit the model.
    """
    layer = GlobalLayer()
    path = agent_file(app_dir)
    if path is not None:
        layer.agent = _agent_config(read(path), connectors, environ, layer, add_inline)
        root = app_dir / AGENT_FILE
        if path != root and root.is_file():
            layer.warnings.append(
                ConfigWarning(
                    file=Path(AGENT_FILE),
                    message=(f"ignored: {AGENT_DIR}/{AGENT_FILE} is the application's agent.yml"),
                )
            )
    else:
        layer.agent = _yao_defaults(AgentConfig(), uses_given=False)
    folder = app_dir / AGENT_DIR
    prompts = folder / "prompts.yml"
    try:
        if prompts.is_file():
            layer.prompts = load_prompts(read(prompts))
        layer.locales = load_locale_dir(folder / "locales", read)
    except ConfigError as exc:
        layer.problems.append(exc)
    for name, what in (("kb.yml", "knowledge bases"), ("search.yml", "search")):
        file = folder / name
        if not file.is_file():
            continue
        try:
            doc = read(file)
        except ConfigError as exc:
            layer.problems.append(exc)
            continue
        layer.warnings.append(warning(doc, (), f"has no effect in Cage: Cage has no {what}"))
    return layer


def _yao_defaults(agent: AgentConfig, *, uses_given: bool) -> AgentConfig:
    update = {k: v for k, v in YAO_DEFAULT_USES.items() if not getattr(agent.uses, k)}
    if not uses_given:
        update["default"] = YAO_DEFAULT_ASSISTANT
    return agent.model_copy(update={"uses": agent.uses.model_copy(update=update)})


def _agent_config(
    doc: Document,
    connectors: ConnectorTable,
    environ: Mapping[str, str],
    layer: GlobalLayer,
    add_inline: Callable[[object, Document], None],
) -> AgentConfig:
    data = {} if doc.value is None else doc.value
    if not isinstance(data, dict):
        raise ConfigError("agent.yml must hold a mapping", file=doc.file, line=doc.line_for(()))
    data = dict(data)
    inline = data.pop("connectors", None)
    if inline is not None:
        add_inline(inline, doc)
    if "default_connector" in data:
        raise ConfigError(
            "unknown key",
            file=doc.file,
            key_path="default_connector",
            line=doc.line_for(("default_connector",)),
        )
    expander = EnvExpander(environ, doc)
    for section in ("system", "uses"):  # Yao resolves $ENV. in these two
        expander.expand_values(data, (section,))
    agent = validate(AgentConfig, data, doc)
    layer.warnings.extend(inert_keys(doc, AGENT))
    for section, conn_of in (("roles", agent.roles), ("system", agent.system)):
        for role in ROLES:
            conn = getattr(conn_of, role)
            if conn and conn not in connectors:
                layer.problems.append(
                    ConfigError(
                        f"connector {conn!r} is not defined",
                        file=doc.file,
                        key_path=f"{section}.{role}",
                        line=doc.line_for((section, role)),
                    )
                )
    default = agent.uses.default
    if default and default in connectors:
        agent = agent.model_copy(update={"default_connector": default})
    elif default:
        layer.warnings.append(
            warning(
                doc,
                ("uses", "default"),
                (
                    f"{default!r} is Yao's default assistant (no connector of that id); "
                    "Cage requests always name their assistant, so it has no effect"
                ),
            )
        )
    return _yao_defaults(agent, uses_given="uses" in data)
