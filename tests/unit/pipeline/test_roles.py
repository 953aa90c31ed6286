"""`runner.connectors`: `override`, the models of other roles, and what a runner cannot use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.dsl import AppLoader
from orchestrator.errors import ConfigError
from orchestrator.pipeline.modes.roles import role_models
from orchestrator.pipeline.modes.runner import runner_connector

ENV = {"MAIN_KEY": "main-key-abcdef", "OTHER_KEY": "other-key-ghijkl"}


def _conn(model: str, host: str = "https://models.example", key: str = "$ENV.MAIN_KEY") -> str:
    return json.dumps(
        {"label": model, "type": "anthropic", "options": {"model": model, "key": key, "host": host}}
    )


def _loader(
    tmp_path: Path, runner: str, connectors: dict[str, Any], package_connector: str | None = "main"
) -> AppLoader:
    files = {
        "connectors/main.conn.yao": _conn("big"),
        "connectors/small.conn.yao": _conn("small"),
        "connectors/huge.conn.yao": _conn("huge"),
        "connectors/elsewhere.conn.yao": _conn("far", host="https://other.example"),
        "connectors/otherkey.conn.yao": _conn("small", key="$ENV.OTHER_KEY"),
        "assistants/a/package.yao": json.dumps(
            {"name": "A", **({"connector": package_connector} if package_connector else {})}
        ),
        "assistants/a/sandbox.yao": json.dumps(
            {"version": "2.0", "runner": {"name": runner, "connectors": connectors}}
        ),
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return AppLoader(tmp_path, environ=ENV, builtin_dir=None)


def test_light_and_heavy_models_of_the_same_endpoint(tmp_path: Path) -> None:
    loader = _loader(tmp_path, "claude", {"light": "small", "heavy": "huge"})
    assistant = loader.get("a")
    assert role_models(assistant, loader, runner_connector(assistant, loader)) == {
        "light": "small",
        "heavy": "huge",
    }


@pytest.mark.parametrize("other", ["elsewhere", "otherkey"])
def test_a_role_at_another_endpoint_is_refused_with_file_and_key(tmp_path: Path, other: str) -> None:
    loader = _loader(tmp_path, "claude", {"light": other})
    assistant = loader.get("a")
    with pytest.raises(ConfigError, match="same endpoint") as err:
        role_models(assistant, loader, runner_connector(assistant, loader))
    assert str(err.value.file).endswith("sandbox.yao") and err.value.key_path == "runner.connectors.light"


def test_override_force_and_user(tmp_path: Path) -> None:
    forced = _loader(tmp_path / "f", "claude", {"default": "huge"})
    assert runner_connector(forced.get("a"), forced).model == "huge"
    user = _loader(tmp_path / "u", "claude", {"default": {"connector": "huge", "override": "user"}})
    assert runner_connector(user.get("a"), user).model == "big"  # the assistant's own connector wins
    fallback = _loader(
        tmp_path / "n",
        "claude",
        {"default": {"connector": "huge", "override": "user"}},
        package_connector=None,
    )
    assert runner_connector(fallback.get("a"), fallback).model == "huge"


def test_a_role_the_runner_cannot_use_is_a_located_warning_and_dropped(tmp_path: Path) -> None:
    loader = _loader(tmp_path, "codex", {"light": "small", "vision": "small"})
    assistant = loader.get("a")
    assert assistant.sandbox is not None and assistant.sandbox.runner.connectors == {}
    messages = {w.key_path: w.message for w in assistant.warnings}
    assert "no setting for a light model" in messages["runner.connectors.light"]
    assert "no setting for a vision model" in messages["runner.connectors.vision"]
    assert role_models(assistant, loader, runner_connector(assistant, loader)) == {}
