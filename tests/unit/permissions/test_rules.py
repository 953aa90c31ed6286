"""Matching tool calls against `permissions` rules: tool globs, path globs, first match wins."""

from __future__ import annotations

import pytest

from orchestrator.dsl.permissions import PermissionPolicy
from orchestrator.permissions import ToolRequest
from orchestrator.permissions.rules import always_rule, normalise_path, path_matches, rule_matches, verdict


def _policy(mode: str = "bypass", *rules: dict[str, object]) -> PermissionPolicy:
    return PermissionPolicy.model_validate({"mode": mode, "rules": list(rules)})


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("secrets/**", "secrets/key", True),
        ("secrets/**", "secrets/a/b/key.pem", True),
        ("secrets/**", "secrets", True),
        ("secrets/**", "/workspace/secrets/key", True),
        ("secrets/**", "./secrets/../secrets/key", True),
        ("secrets/**", "src/../secrets/key", True),
        ("secrets/**", "src/secrets/key", False),
        ("secrets/**", "secretsx/key", False),
        ("**/*.pem", "a/b/c.pem", True),
        ("**/*.pem", "c.pem", True),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/sub/a.py", False),
        ("/etc/**", "/etc/passwd", True),
        ("/workspace/src/**", "src/a.py", True),
        ("src/**", "/etc/passwd", False),
    ],
)
def test_path_globs(pattern: str, path: str, matches: bool) -> None:
    assert path_matches(pattern, path) is matches


def test_normalise_path() -> None:
    assert normalise_path("./a/./b/../c") == "a/c"
    assert normalise_path("/workspace") == "."
    assert normalise_path("/workspace/../etc/x") == "/etc/x"
    assert normalise_path("../../etc/x") == "/etc/x"
    assert normalise_path("/work/a", workspace="/work") == "a"


def test_commands_are_plain_globs() -> None:
    policy = _policy("ask", {"allow": {"bash": "git *"}})
    assert verdict(policy, ToolRequest("bash", subject="git push origin main")).action == "allow"
    assert verdict(policy, ToolRequest("bash", subject="git")).action == "ask"
    assert verdict(policy, ToolRequest("bash", subject="rm -rf / ; git x")).action == "ask"


def test_first_match_wins_and_the_mode_decides_the_rest() -> None:
    policy = _policy(
        "deny",
        {"deny": {"write": "secrets/**"}},
        {"allow": "write"},
        {"ask": "mcp:github/*"},
    )
    found = verdict(policy, ToolRequest("write", subject="secrets/k"))
    assert (found.action, found.rule_text) == ("deny", "deny write secrets/**")
    assert verdict(policy, ToolRequest("write", subject="src/a.py")).action == "allow"
    assert verdict(policy, ToolRequest("mcp:github/create_issue")).action == "ask"
    assert verdict(policy, ToolRequest("mcp:gitlab/create_issue")).action == "deny"
    none = verdict(policy, ToolRequest("bash", subject="ls"))
    assert (none.action, none.rule) == ("deny", None)
    assert verdict(_policy("bypass"), ToolRequest("bash", subject="ls")).action == "allow"
    assert verdict(_policy("ask"), ToolRequest("bash", subject="ls")).action == "ask"


def test_tool_names_are_case_insensitive_and_globs() -> None:
    policy = _policy("ask", {"deny": "*"})
    assert verdict(policy, ToolRequest("WebFetch")).action == "deny"
    assert rule_matches(_policy("ask", {"deny": "BASH"}).rules[0], ToolRequest("bash"))


def test_session_rules_come_first() -> None:
    policy = _policy("ask", {"deny": {"bash": "rm *"}})
    extra = (always_rule(ToolRequest("bash", subject="rm *.log")),)
    assert verdict(policy, ToolRequest("bash", subject="rm *.log"), extra=extra).action == "allow"
    # the subject is literal: allowing `rm *.log` never allows another rm
    assert verdict(policy, ToolRequest("bash", subject="rm -rf src"), extra=extra).action == "deny"


def test_always_rule_without_subject_allows_the_tool() -> None:
    rule = always_rule(ToolRequest("mcp:github/list_issues"))
    assert rule.subject is None and rule.action == "allow"
    assert rule_matches(rule, ToolRequest("mcp:github/list_issues"))
    assert not rule_matches(rule, ToolRequest("mcp:github/delete_repo"))


def test_always_rule_on_a_path_matches_that_path_only() -> None:
    rule = always_rule(ToolRequest("write", subject="src/[a]*.py"))
    assert rule_matches(rule, ToolRequest("write", subject="src/[a]*.py"))
    assert not rule_matches(rule, ToolRequest("write", subject="src/a.py"))
