"""The tai adapter's exec: the turn document on stdin, secrets only in the environment."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from orchestrator.dsl import ConnectorSpec
from orchestrator.errors import ConfigError, RunnerError
from runners.base import TurnRequest
from runners.registry import adapter_for
from runners.tai import TaiAdapter, TaiTurn
from runners.tai.turn import HEADERS_ENV, KEY_ENV

KEY = "sk-ant-tai-exec-secret-9931"


def connector(**changes: Any) -> ConnectorSpec:
    data: dict[str, Any] = {
        "id": "fake",
        "label": "fake",
        "type": "anthropic",
        "model": "claude-sonnet-4-5",
        "base_url": "http://127.0.0.1:8900",
        "key": KEY,
        "max_tokens": 2000,
    }
    return ConnectorSpec.model_validate({**data, **changes})


def turn(**changes: Any) -> TurnRequest:
    data: dict[str, Any] = {
        "assistant_id": "a.tai",
        "owner": "o",
        "session_id": "chat-9",
        "turn_id": "turn-9",
        "prompt": "fix it",
        "system_prompt": "Be careful.",
        "connector": connector(),
        "workdir": "/workspace",
        "state_dir": "/workspace/.cage-state/runner",
        "model_url": "http://host.docker.internal:8900",
        "environment": {"EXTRA": "1"},
    }
    return TurnRequest.model_validate({**data, **changes})


def test_the_registry_knows_tai() -> None:
    adapter = adapter_for("tai")
    assert isinstance(adapter, TaiAdapter)
    assert adapter.image == "tai" and adapter.cancel.signal == signal.SIGINT


def test_the_turn_goes_on_stdin_and_the_key_only_in_the_environment() -> None:
    rexec = TaiAdapter().build_exec(turn())
    assert rexec.argv == ("cage-tai", "run")
    assert rexec.stdin is not None and not rexec.keep_stdin_open
    document = TaiTurn.model_validate_json(rexec.stdin)
    assert document.model.base_url == "http://host.docker.internal:8900"  # the container's view
    assert document.model.provider == "anthropic" and document.model.max_tokens == 2000
    assert document.model.key_env == KEY_ENV and document.model.headers_env is None
    assert document.system == "Be careful." and document.prompt == "fix it"
    assert document.checkpoint_dir == "/workspace/.cage-state/runner/tai/checkpoints"
    assert document.resume_turn_id is None and document.options.max_rounds == 8
    assert KEY not in rexec.stdin.decode() and KEY not in " ".join(rexec.argv)
    assert rexec.env[KEY_ENV] == KEY and rexec.env["EXTRA"] == "1"
    assert rexec.secret_env == (KEY_ENV,)
    assert KEY not in repr(rexec)


def test_headers_resume_history_and_options() -> None:
    rexec = TaiAdapter().build_exec(
        turn(
            connector=connector(headers={"x-api-token": "tok-secret-1"}),
            resume={"turn_id": "turn-8"},
            history=({"role": "user", "content": "earlier"}, {"role": "tool", "content": "x"}),
            options={"max_rounds": 3, "max_parallel": 2, "agent": False},
            model_url=None,
        )
    )
    assert rexec.stdin is not None
    document = TaiTurn.model_validate_json(rexec.stdin)
    assert document.resume_turn_id == "turn-8"
    assert [(m.role, m.content) for m in document.history] == [("user", "earlier")]
    assert (document.options.max_rounds, document.options.max_parallel, document.options.agent) == (
        3,
        2,
        False,
    )
    assert document.model.base_url == "http://127.0.0.1:8900"
    assert document.model.headers_env == HEADERS_ENV
    assert json.loads(rexec.env[HEADERS_ENV]) == {"x-api-token": "tok-secret-1"}
    assert set(rexec.secret_env) == {KEY_ENV, HEADERS_ENV}
    assert "tok-secret-1" not in rexec.stdin.decode()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"connector": None}, "no connector"),
        ({"prompt": "  "}, "prompt is empty"),
    ],
)
def test_unusable_turns_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(RunnerError, match=message):
        TaiAdapter().build_exec(turn(**changes))


@pytest.mark.parametrize(
    ("options", "key_path"),
    [({"max_rounds": 0}, "runner.options.max_rounds"), ({"turbo": True}, "runner.options.turbo")],
)
def test_bad_options_are_config_errors_with_the_key(options: dict[str, Any], key_path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        TaiAdapter().build_exec(turn(options=options))
    assert caught.value.key_path == key_path and str(caught.value.file) == "sandbox.yao"
