"""The redactor masks registered secrets and secret-looking tokens, and leaves the rest alone."""

from __future__ import annotations

import io
import json

import pytest
import structlog

from orchestrator.logs import configure_logging
from orchestrator.redaction import MASK, redact, redact_value, register_secret


@pytest.mark.parametrize(
    ("text", "leaked"),
    [
        ("key is sk-ant-api03-abcdefghijklmnop", "sk-ant-api03-abcdefghijklmnop"),
        ("OPENAI sk-proj-0123456789abcdef", "sk-proj-0123456789abcdef"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9.payload.sig"),
        ("ANTHROPIC_API_KEY=hunter2hunter2", "hunter2hunter2"),
        ("GITHUB_TOKEN: ghp_abcdefabcdef", "ghp_abcdefabcdef"),
        ('{"api_key": "plainsecretvalue"}', "plainsecretvalue"),
        ("password=correct-horse-battery", "correct-horse-battery"),
    ],
)
def test_secret_shapes_are_masked(text: str, leaked: str) -> None:
    out = redact(text)
    assert leaked not in out
    assert MASK in out


def test_registered_secret_is_masked_anywhere() -> None:
    register_secret("zq-unusual-value-77")
    assert redact("stderr: failed with zq-unusual-value-77 at line 3") == "stderr: failed with *** at line 3"


def test_short_values_are_not_registered() -> None:
    register_secret("abc")
    assert redact("abc abc") == "abc abc"


def test_plain_text_is_untouched() -> None:
    text = "cannot mix ints and objects in computer.ports[1]; tokens used: 120"
    assert redact(text) == text


def test_structured_values_mask_sensitive_keys() -> None:
    data = {
        "env": {"ANTHROPIC_API_KEY": "x1", "HOME": "/workspace"},
        "argv": ["claude", "--api-key=sk-ant-abcdefghij"],
    }
    out = redact_value(data)
    assert out["env"] == {"ANTHROPIC_API_KEY": MASK, "HOME": "/workspace"}
    assert "sk-ant-abcdefghij" not in json.dumps(out)


def test_log_lines_are_redacted_json() -> None:
    buf = io.StringIO()
    configure_logging("DEBUG", stream=buf, json=True)
    register_secret("tok-registered-123456")
    structlog.contextvars.bind_contextvars(session_id="s1", turn_id="t1")
    try:
        structlog.get_logger().info(
            "runner.failed", stderr="401 for tok-registered-123456", api_key="k-zzzzzz"
        )
    finally:
        structlog.contextvars.clear_contextvars()
    line = json.loads(buf.getvalue().strip().splitlines()[-1])
    assert line["event"] == "runner.failed"
    assert line["session_id"] == "s1" and line["turn_id"] == "t1"
    assert line["stderr"] == "401 for ***"
    assert line["api_key"] == MASK


@pytest.mark.parametrize(
    "text",
    ["Basic Message Types", "the basic configuration is fine", "a BASIC Authentication primer"],
)
def test_prose_after_basic_is_untouched(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("token", ["dXNlcjpwYXNz", "YWxhZGRpbjpvcGVuc2VzYW1l", "dXNlcjpwYXNzd29yZA=="])
def test_basic_credentials_are_masked(token: str) -> None:
    out = redact(f"Authorization: Basic {token}")
    assert token not in out and MASK in out


def test_text_without_trigger_words_is_returned_as_is() -> None:
    text = "Edited src/app.py: 3 lines changed, all checks passed"
    assert redact(text) is text
