"""Package `options` reach the model through the real agent CLIs: a `cage run` turn of claude,
opencode and codex in its image, and the fake model server's record of what each CLI sent.

The package sets the options each CLI has a setting for (`orchestrator/dsl/option_support.py`):
claude `model` and `max_tokens`, opencode `model`, `temperature` and `max_tokens`, codex `model`
and `reasoning_effort`. The package model names a scenario (`<name>@hello`), so the server
plays it only when the CLI really asked for that model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.runners.conftest import App, cage_run

pytestmark = pytest.mark.slow
PACKAGE_OPTIONS: dict[str, dict[str, Any]] = {
    "claude": {"model": "claude-haiku-4-5@hello", "max_tokens": 555},
    "opencode": {"model": "opt-model@hello", "temperature": 0.25, "max_tokens": 555},
    "codex": {"model": "gpt-5.4-mini@hello", "reasoning_effort": "low"},
}
PROMPT = "say hi from the package options test"


def turn_requests(app: App, runner: str, before: int) -> list[dict[str, Any]]:
    """The bodies of the model requests this turn sent that carry the prompt (a CLI's side
    requests, such as a title, do not)."""
    sent = [
        r.body
        for r in app.server.requests.all()[before:]
        if r.api in {"anthropic", "openai-chat", "openai-responses"} and isinstance(r.body, dict)
    ]
    turn = [b for b in sent if PROMPT in json.dumps(b)]
    assert turn, f"{runner}: no model request carried the prompt: {[json.dumps(b)[:500] for b in sent]}"
    return turn


def run_with_options(app: App, runner: str, workspace: Path) -> list[dict[str, Any]]:
    assistant = app.assistant(runner)
    package = app.root / "assistants" / "e2e" / runner / "package.yao"
    spec = json.loads(package.read_text())
    package.write_text(json.dumps({**spec, "options": PACKAGE_OPTIONS[runner]}))
    before = len(app.server.requests.all())
    result = cage_run(app, assistant, workspace, PROMPT)
    assert result.code == 0, result.stderr[-2000:]
    return turn_requests(app, runner, before)


def test_claude_sends_the_package_model_and_output_token_cap(app: App, workspace: Path) -> None:
    for body in run_with_options(app, "claude", workspace):
        assert body["model"] == "claude-haiku-4-5@hello"
        assert body["max_tokens"] == 555


def test_opencode_sends_the_package_model_temperature_and_output_limit(app: App, workspace: Path) -> None:
    for body in run_with_options(app, "opencode", workspace):
        assert body["model"] == "opt-model@hello"
        assert body["temperature"] == 0.25
        assert body["max_tokens"] == 555


def test_codex_sends_the_package_model_and_reasoning_effort(app: App, workspace: Path) -> None:
    for body in run_with_options(app, "codex", workspace):
        assert body["model"] == "gpt-5.4-mini@hello"
        assert body["reasoning"]["effort"] == "low"
