"""`permissions` in sandbox.yao: the forms the loader accepts, and located errors for bad rules."""

from __future__ import annotations

from datetime import timedelta

import pytest

from orchestrator.dsl import SandboxSpec, parse_jsonc
from orchestrator.dsl.permissions import PermissionMode, PermissionRule
from orchestrator.dsl.sandboxfile import load_sandbox
from orchestrator.errors import ConfigError, ConfigErrors


def _load(permissions: str) -> SandboxSpec:
    text = '{\n "version": "2.0",\n "runner": {"name": "yao"},\n "permissions": ' + permissions + "\n}"
    return load_sandbox(parse_jsonc(text, file="assistants/a/sandbox.yao"), environ={})


def test_default_is_bypass_and_asks_nothing() -> None:
    spec = load_sandbox(
        parse_jsonc('{"version": "2.0", "runner": {"name": "tai"}}', file="s.yao"), environ={}
    )
    assert spec.permissions.mode is PermissionMode.BYPASS
    assert spec.permissions.timeout == timedelta(minutes=5)
    assert spec.permissions.default == "deny"
    assert not spec.permissions.asks


def test_every_rule_form() -> None:
    spec = _load(
        '{"mode": "ask", "timeout": "90s", "default": "allow", "rules": [\n'
        '  {"allow": {"bash": "git *"}},\n  {"deny": {"write": "secrets/**"}},\n  {"ask": "mcp:github/*"}]}'
    )
    policy = spec.permissions
    assert policy.mode is PermissionMode.ASK and policy.timeout == timedelta(seconds=90)
    assert policy.default == "allow" and policy.asks
    assert policy.rules == (
        PermissionRule(action="allow", tool="bash", subject="git *"),
        PermissionRule(action="deny", tool="write", subject="secrets/**"),
        PermissionRule(action="ask", tool="mcp:github/*"),
    )
    assert [r.text() for r in policy.rules] == [
        "allow bash git *",
        "deny write secrets/**",
        "ask mcp:github/*",
    ]


def test_rules_alone_make_a_bypass_policy_ask() -> None:
    assert _load('{"rules": [{"deny": "bash"}]}').permissions.asks


@pytest.mark.parametrize(
    ("permissions", "key_path", "fragment"),
    [
        ('{"mode": "sometimes"}', "permissions.mode", "bypass"),
        ('{"default": "ask"}', "permissions.default", "allow"),
        ('{"timeout": "soon"}', "permissions.timeout", "duration"),
        ('{"timeout": "0s"}', "permissions.timeout", "longer than 0s"),
        (
            '{"rules": [{"allow": "bash"},\n {"permit": "bash"}]}',
            "permissions.rules[1]",
            "unknown key 'permit'",
        ),
        ('{"rules": [{"allow": "bash", "deny": "write"}]}', "permissions.rules[0]", "exactly one key"),
        ('{"rules": [{"deny": {"bash": "rm *", "write": "x"}}]}', "permissions.rules[0]", "one tool"),
        ('{"rules": [{"deny": {"bash": 3}}]}', "permissions.rules[0]", "must be a string"),
        ('{"rules": [{"ask": ""}]}', "permissions.rules[0].tool", "must not be empty"),
        ('{"rules": "bash"}', "permissions.rules", "tuple"),
        ('{"ask": true}', "permissions.ask", "unknown key"),
    ],
)
def test_bad_policies_are_located(permissions: str, key_path: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(permissions)
    errors = list(info.value.errors) if isinstance(info.value, ConfigErrors) else [info.value]
    assert any(e.key_path == key_path and fragment in str(e) for e in errors), [str(e) for e in errors]
    located = next(e for e in errors if e.key_path == key_path)
    assert located.file is not None and str(located.file).endswith("sandbox.yao")
    assert located.line is not None and located.line >= 4
