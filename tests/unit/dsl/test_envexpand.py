from __future__ import annotations

import pytest

from orchestrator.dsl import parse_jsonc
from orchestrator.dsl.envexpand import EnvExpander, env_reference
from orchestrator.errors import ConfigError
from orchestrator.redaction import redact


def test_expansion_and_secret_registration() -> None:
    doc = parse_jsonc('{"a": {"key": "$ENV.K"}, "b": "plain", "c": "$ENV.C"}', file="f.yao")
    data = {"a": {"key": "$ENV.K"}, "b": "plain", "c": "$ENV.C"}
    ex = EnvExpander({"K": "very-secret-value-42", "C": "cval"}, doc)
    ex.expand_in(data, ("a", "key"), secret=True)
    ex.expand_in(data, ("c",))
    ex.expand_in(data, ("missing", "x"))
    assert data == {"a": {"key": "very-secret-value-42"}, "b": "plain", "c": "cval"}
    assert redact("leaked very-secret-value-42!") == "leaked ***!"
    assert redact("cval") == "cval"
    assert env_reference("$ENV.X") == "X" and env_reference("ENV.X") is None and env_reference(3) is None


def test_missing_variable_error_has_no_value() -> None:
    doc = parse_jsonc('{\n"a": "$ENV.MISSING_ONE"}', file="f.yao")
    with pytest.raises(ConfigError) as info:
        EnvExpander({"OTHER": "x"}, doc).expand("$ENV.MISSING_ONE", ("a",))
    assert (str(info.value), info.value.key_path, info.value.line) == (
        "f.yao:2: a: environment variable MISSING_ONE is not set",
        "a",
        2,
    )
