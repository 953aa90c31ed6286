"""`TaiAdapter`: the `tai` runner — Cage's native loop as a CLI (`cage-tai run`) in the container.

The turn goes in as one JSON document on stdin (then closed); the key and headers go in
environment variables the document names. When the turn asks Cage (`ask_permissions`) the
document is one line and stdin stays open: tai prints a control line before each tool call (and
for each question) and reads the bridge's answer line there (`runners.tai.control`).

Cancel: SIGINT to the process group; tai cancels its
loop, settles running tools, prints `stream_end` (cancelled) and exits 130. SIGKILL after the
grace period.
"""

from __future__ import annotations

import json
import signal

from orchestrator.dsl import ConnectorSpec
from orchestrator.errors import RunnerError
from orchestrator.llm import ModelOptions, compaction_policy, model_options
from orchestrator.llm.images import has_vision
from orchestrator.stream import TurnBuilder
from runners.base import CancelPolicy, RunnerExec, Supports, TurnRequest, connector_key
from runners.native_loop.options import NativeOptions
from runners.skills import skill_root
from runners.tai.translator import RESUME_KEY, TaiTranslator
from runners.tai.turn import (
    HEADERS_ENV,
    KEY_ENV,
    MCP_ENV_PREFIX,
    HistoryMessage,
    TaiImage,
    TaiMcpServer,
    TaiModel,
    TaiTurn,
)

RUNNER = "tai"
COMMAND = ("cage-tai", "run")


def checkpoint_dir(turn: TurnRequest) -> str:
    """Checkpoints live in the runner's state dir in the workspace, so they outlive the container."""
    return f"{turn.state_dir.rstrip('/')}/tai/checkpoints"


def _model(turn: TurnRequest, connector: ConnectorSpec, options: ModelOptions) -> TaiModel:
    provider = connector.type.value
    if provider not in ("anthropic", "openai"):
        raise RunnerError(RUNNER, f"connector type {provider!r} is not supported (anthropic, openai)")
    timeout = connector.timeout.total_seconds() if connector.timeout is not None else 120.0
    return TaiModel(
        provider=provider,
        model=turn.package_options.model or connector.model,
        base_url=turn.model_url or connector.base_url,
        timeout=timeout,
        max_retries=connector.max_retries if connector.max_retries is not None else 2,
        headers_env=HEADERS_ENV if connector.headers else None,
        max_tokens=options.max_tokens,
        temperature=options.temperature,
        thinking=options.thinking,
        thinking_budget=options.thinking_budget,
        sampling=options.sampling,
    )


def _loop_options(turn: TurnRequest) -> NativeOptions:
    options = NativeOptions.parse(turn.options)
    return options.model_copy(update={"max_rounds": options.rounds(turn.max_turn)})


def mcp_servers(turn: TurnRequest) -> tuple[tuple[TaiMcpServer, ...], dict[str, str]]:
    """The turn's MCP servers without their secrets, and the env that holds them
    (`CAGE_TAI_MCP_<server>_<n>`). The pipeline already pointed HTTP servers at the gateway."""
    servers: list[TaiMcpServer] = []
    env: dict[str, str] = {}
    for index, spec in enumerate(turn.mcp_servers):
        names: dict[str, dict[str, str]] = {"env": {}, "headers": {}}
        for field in ("env", "headers"):
            values: dict[str, str] = getattr(spec, field)
            for key, value in values.items():
                variable = f"{MCP_ENV_PREFIX}{index}_{len(env)}"
                env[variable] = value
                names[field][key] = variable
        bare = spec.model_copy(update={"env": {}, "headers": {}})
        servers.append(TaiMcpServer(server=bare, env_vars=names["env"], header_vars=names["headers"]))
    return tuple(servers), env


def _history(turn: TurnRequest) -> tuple[HistoryMessage, ...]:
    out: list[HistoryMessage] = []
    for message in turn.history:
        role, content = message.get("role"), message.get("content")
        if role in ("user", "assistant") and isinstance(content, str) and content:
            out.append(HistoryMessage(role=role, content=content))
    return tuple(out)


def tai_turn(turn: TurnRequest) -> TaiTurn:
    """The stdin document for one turn (no secret in it).

    Raises:
        RunnerError: no connector, an unsupported connector type, or an empty prompt.
        ConfigError: bad `runner.options` (the key path named).
    """
    if not turn.prompt.strip():
        raise RunnerError(RUNNER, "the prompt is empty")
    if turn.connector is None:
        raise RunnerError(RUNNER, "the assistant has no connector: tai needs a model")
    options = model_options(turn.connector, turn.package_options)
    return TaiTurn(
        assistant_id=turn.assistant_id,
        session_id=turn.session_id,
        turn_id=turn.turn_id,
        prompt=turn.prompt,
        system=turn.system_prompt,
        history=_history(turn),
        model=_model(turn, turn.connector, options),
        options=_loop_options(turn),
        workdir=turn.workdir,
        checkpoint_dir=checkpoint_dir(turn),
        resume_turn_id=turn.resume.get(RESUME_KEY),
        ask_permissions=turn.ask_permissions,
        mcp_servers=mcp_servers(turn)[0],
        compaction=compaction_policy(turn.connector, options, turn.compaction),
        skills_dir=skill_root(RUNNER, home=turn.home, state_dir=turn.state_dir),
        summary_model=turn.role_models.get("light"),
        images=tuple(
            TaiImage(path=i.path, media_type=i.media_type, name=i.name)
            for i in turn.images
            if i.path and has_vision(turn.connector)
        ),
    )


class TaiAdapter:
    """Drives `cage-tai run` for one turn (see the module docstring)."""

    name = RUNNER
    image = "tai"
    supports = Supports(
        resume=True, thinking=True, text_deltas=True, usage=True, cost=False, mcp=True, images=True
    )
    cancel = CancelPolicy(signal=int(signal.SIGINT), grace_seconds=5.0)

    def build_exec(self, turn: TurnRequest) -> RunnerExec:
        """The exec for one turn.

        Raises:
            RunnerError: see `tai_turn`.
        """
        document = tai_turn(turn)
        env = dict(turn.environment)
        env[KEY_ENV] = connector_key(turn.connector)
        secret_env = [KEY_ENV]
        connector = turn.connector
        if connector is not None and connector.headers:
            env[HEADERS_ENV] = json.dumps({k: v.get_secret_value() for k, v in connector.headers.items()})
            secret_env.append(HEADERS_ENV)
        _, mcp_env = mcp_servers(turn)
        env.update(mcp_env)
        secret_env += sorted(mcp_env)
        stdin = document.model_dump_json().encode()
        return RunnerExec(
            argv=COMMAND,
            env=env,
            stdin=stdin + b"\n" if turn.ask_permissions else stdin,
            keep_stdin_open=turn.ask_permissions,
            workdir=turn.workdir,
            secret_env=tuple(secret_env),
        )

    def translator(self, builder: TurnBuilder, turn: TurnRequest) -> TaiTranslator:
        return TaiTranslator(builder, turn)
