"""Package `options` an agent CLI has a setting for reach it (through `cli_connector` and
`cli_runner_options`, as the pipeline applies them): Claude Code's model and output-token
variables, opencode's model, temperature and output limit, codex's model and reasoning effort."""

from __future__ import annotations

import json
import tomllib

from orchestrator.dsl import ConnectorSpec, ConnectorType
from orchestrator.dsl.option_support import cli_connector, cli_runner_options
from orchestrator.dsl.package import PackageOptions
from runners.base import RunnerExec, TurnRequest
from runners.registry import adapter_for

OPTIONS = PackageOptions.model_validate(
    {"model": "pkg-model", "max_tokens": 555, "temperature": 0.25, "reasoning_effort": "low"}
)


def build(runner: str, kind: ConnectorType) -> RunnerExec:
    connector = ConnectorSpec(id="c", label="c", type=kind, model="conn-model", base_url="http://127.0.0.1:9")
    turn = TurnRequest(
        assistant_id="a",
        owner="o",
        session_id="session",
        turn_id="turn",
        prompt="hi",
        connector=cli_connector(connector, OPTIONS, runner),
        options=cli_runner_options({}, OPTIONS, runner),
    )
    return adapter_for(runner).build_exec(turn)


def file_text(exec_: RunnerExec, suffix: str) -> str:
    (text,) = [f.content for f in exec_.files if f.path.endswith(suffix)]
    return text


def test_claude_gets_the_model_and_the_output_token_cap() -> None:
    exec_ = build("claude", ConnectorType.ANTHROPIC)
    assert exec_.env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "555"
    assert exec_.env["ANTHROPIC_MODEL"] == "pkg-model"


def test_opencode_gets_the_model_temperature_and_output_limit() -> None:
    config = json.loads(file_text(build("opencode", ConnectorType.OPENAI), "opencode.json"))
    assert config["model"].endswith("/pkg-model")
    (model,) = next(iter(config["provider"].values()))["models"].values()
    assert model["options"]["temperature"] == 0.25 and model["limit"]["output"] == 555


def test_codex_gets_the_model_and_reasoning_effort() -> None:
    config = tomllib.loads(file_text(build("codex", ConnectorType.OPENAI), "config.toml"))
    assert config["model"] == "pkg-model" and config["model_reasoning_effort"] == "low"


def test_an_explicit_runner_option_wins() -> None:
    assert cli_runner_options({"reasoning_effort": "high"}, OPTIONS, "codex")["reasoning_effort"] == "high"
