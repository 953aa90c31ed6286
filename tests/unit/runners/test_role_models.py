"""Role connectors reach the CLIs: claude's model aliases and opencode's `small_model`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import SecretStr

from orchestrator.dsl import ConnectorSpec
from orchestrator.errors import RunnerError
from runners.base import RunnerExec, TurnRequest
from runners.claude import ClaudeAdapter
from runners.opencode import OpencodeAdapter


def _turn(kind: str, **over: Any) -> TurnRequest:
    connector = ConnectorSpec(
        id="main",
        label="Main",
        type=kind,
        model="big-model",
        base_url="https://models.example",
        key=SecretStr("sk-role-test-123456"),
    )
    values: dict[str, Any] = {
        "assistant_id": "a.b",
        "owner": "o",
        "session_id": "c",
        "turn_id": "t",
        "prompt": "hi",
        "connector": connector,
    }
    values.update(over)
    return TurnRequest(**values)


def test_claude_without_roles_uses_one_model_everywhere() -> None:
    env = ClaudeAdapter().build_exec(_turn("anthropic")).env
    assert env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == env["ANTHROPIC_SMALL_FAST_MODEL"] == "big-model"
    assert env["CLAUDE_CODE_SUBAGENT_MODEL"] == "big-model"


def test_claude_maps_light_and_heavy_to_its_model_aliases() -> None:
    turn = _turn("anthropic", role_models={"light": "small-model", "heavy": "huge-model"})
    env = ClaudeAdapter().build_exec(turn).env
    assert env["ANTHROPIC_MODEL"] == env["ANTHROPIC_DEFAULT_SONNET_MODEL"] == "big-model"
    assert env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == env["ANTHROPIC_SMALL_FAST_MODEL"] == "small-model"
    assert env["ANTHROPIC_DEFAULT_OPUS_MODEL"] == "huge-model"
    assert "CLAUDE_CODE_SUBAGENT_MODEL" not in env  # sub-agents keep the alias they ask for


@pytest.mark.parametrize("adapter", [ClaudeAdapter(), OpencodeAdapter()])
def test_a_role_the_cli_has_no_setting_for_is_refused(adapter: Any) -> None:
    kind = "anthropic" if isinstance(adapter, ClaudeAdapter) else "openai"
    with pytest.raises(RunnerError, match="no setting for a vision model"):
        adapter.build_exec(_turn(kind, role_models={"vision": "eyes"}))


def _opencode_config(rexec: RunnerExec) -> dict[str, Any]:
    (f,) = [f for f in rexec.files if f.path.endswith("opencode.json")]
    return dict(json.loads(f.content))


def test_opencode_light_is_its_small_model_of_the_same_provider() -> None:
    config = _opencode_config(
        OpencodeAdapter().build_exec(_turn("openai", role_models={"light": "small-model"}))
    )
    assert config["model"] == "cage/big-model" and config["small_model"] == "cage/small-model"
    models = config["provider"]["cage"]["models"]
    assert set(models) == {"big-model", "small-model"} and models["small-model"]["name"] == "small-model"
    plain = _opencode_config(OpencodeAdapter().build_exec(_turn("openai")))
    assert plain["small_model"] == "cage/big-model"
